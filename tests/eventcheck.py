from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from loopwarden.events import Event, GuardVerdict
from loopwarden.tools import Tool, ToolResult, tool


def verdicts(events: Iterable[Event]) -> list[str]:
    return [e.action for e in events if isinstance(e, GuardVerdict)]


def of_type(events: Iterable[Event], type_: str) -> list[Event]:
    return [e for e in events if e.type == type_]


def verdicts_of(events: Iterable[Event], detector: str) -> list[GuardVerdict]:
    return [e for e in events if isinstance(e, GuardVerdict) and e.detector == detector]


def shell_tool(workdir: Path) -> Tool:
    """A real shell tool: a failing command is a structured `exit_N` failure with its stderr."""

    @tool
    def run(command: str) -> ToolResult | str:
        """Run a shell command in the working folder.

        Args:
            command: the command line
        """
        done = subprocess.run(["sh", "-c", command], cwd=workdir, capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            return ToolResult.failure(f"exit_{done.returncode}", done.stderr.strip())
        return done.stdout

    return run
