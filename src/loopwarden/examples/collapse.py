"""A collapsing model stopped by the ladder, and a healthy model finishing, side by side.

    python -m loopwarden.examples.collapse

Both models are scripted (no network, no key); the tools are real functions.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import Agent, FunctionModel, ModelRequest, RunResult, call, tool
from ..events import GuardVerdict, NudgeInjected, PhaseEnded
from ..models.scripted import ReplyLike
from ..trace.tracing import TraceTarget

NOTES = {"a.txt": "The pump was run at 3 speeds; flow rose linearly with speed.", "b.txt": "Peak flow: 12.4 L/min."}


@tool
def read_file(path: str) -> str:
    """Read a text file from the notes folder.

    Args:
        path: the file name, e.g. a.txt
    """
    if path not in NOTES:
        raise FileNotFoundError(path)
    return NOTES[path]


def collapsing(request: ModelRequest) -> ReplyLike:
    """The seed failure: whatever it is told, it reads a.txt again."""
    return call("read_file", {"path": "a.txt"})


def healthy(request: ModelRequest) -> ReplyLike:
    """Reads each file once, then answers."""
    results = [m for m in request.messages if m["role"] == "tool"]
    if len(results) < len(NOTES):
        return call("read_file", {"path": sorted(NOTES)[len(results)]})
    return "Flow rose linearly with pump speed and peaked at 12.4 L/min."


def describe(console: Console, title: str, result: RunResult) -> None:
    console.rule(title)
    for event in result.events:
        if isinstance(event, GuardVerdict):
            style = "green" if event.action == "allowed" else "yellow" if event.action != "stopped" else "bold red"
            console.print(f"  turn {event.turn}: [{style}]{event.action}[/] ({event.detector}) {event.reason}")
        elif isinstance(event, NudgeInjected):
            console.print(f"  turn {event.turn}: [cyan]nudge injected[/]")
        elif isinstance(event, PhaseEnded):
            console.print(f"  [bold]phase ended[/]: {event.stop_reason} ({event.policy}) {event.message}")
    table = Table(show_header=True)
    for column in ("status", "stop reason", "model calls", "tool executions", "duplicates avoided", "output"):
        table.add_column(column)
    t = result.totals
    table.add_row(
        result.status,
        result.stop_reason,
        str(t.model_calls),
        str(t.tool_executions),
        str(t.duplicates_avoided),
        str(result.output),
    )
    console.print(table)


async def main(trace: TraceTarget = None, *, trace_db: Path | None = None) -> int:
    """Both runs; `trace` as for `Agent(trace=...)` (the demo command passes its run store, and
    `trace_db` names it so the commands to read the runs back can be printed)."""
    console = Console()
    collapse_agent = Agent(FunctionModel(collapsing, name="collapsing"), [read_file], trace=trace)
    collapse_run = await collapse_agent.run("Summarise a.txt")
    describe(console, "A collapsing model (always read_file(a.txt))", collapse_run)
    healthy_agent = Agent(FunctionModel(healthy, name="healthy"), [read_file], trace=trace)
    healthy_run = await healthy_agent.run("Summarise the notes")
    describe(console, "A healthy model", healthy_run)
    # 5 calls of the phase, then asked twice for an answer it never gives (it only calls tools)
    stopped = collapse_run.stop_reason == "repeated_call" and collapse_run.totals.model_calls <= 7
    finished = healthy_run.status == "completed"
    console.print(f"\ncollapse stopped: {stopped}; healthy run finished: {finished}")
    if trace_db is not None:
        console.print(f"both runs are kept in {trace_db}; read the collapse back, or make it an eval case:")
        console.print(f"  loopwarden trace show {collapse_run.run_id} --db {trace_db}", soft_wrap=True)
        console.print(
            f"  loopwarden eval-import {collapse_run.run_id} --db {trace_db} -o collapse.yaml", soft_wrap=True
        )
    return 0 if stopped and finished else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
