"""Approving model-written code in a report run (`ReportConfig.approve_code`).

With `approve_code`, the exploration tool `make_figure` is declared `requires_approval`: each call
waits on the `ApprovalGate` given to `run_report` (the server's gate, or the CLI's terminal
prompt). Where no person can be asked (no gate, `--json`, no TTY) the call is denied with a
reason saying so, never left waiting and never run: the model reads the denial and goes on.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TextIO

from ..policy.approval import ApprovalGate, Decision, PendingCall
from ..tools import Tool

CODE_TOOLS = frozenset({"make_figure"})
"""Exploration tools that run code the model wrote."""
NO_GATE = "approve_code is set but no approval gate was given to the run, so nobody could approve it"
NO_TERMINAL = "no terminal to ask (--json or no TTY), so nobody could approve it"


def gate_code_tools(tools: Sequence[Tool], approve_code: bool) -> list[Tool]:
    """The tools, with those that run model-written code needing approval when asked for."""
    if not approve_code:
        return list(tools)
    return [replace(t, requires_approval=True) if t.name in CODE_TOOLS else t for t in tools]


@dataclass
class DenyAll(ApprovalGate):
    """A gate for runs where no person can decide: every call is denied at once, with the reason."""

    reason: str = NO_GATE

    async def wait(self, call: PendingCall) -> Decision:
        self.pending.pop(call.call_id, None)
        return Decision(approve=False, reason=self.reason, by="loopwarden")


class Pausable(Protocol):
    """A live display (the CLI's progress bar) to stop while the prompt is on screen."""

    def stop(self) -> None: ...
    def start(self) -> None: ...


class LineReader:
    """Lines from a file descriptor without blocking the event loop: waiting in the loop (not in
    a blocking read) lets Ctrl-C cancel the run at once. Unbuffered, so typed-ahead answers stay
    here rather than in a buffer the loop cannot see."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    async def readline(self) -> str:
        """One line with its newline; "" at end of input."""
        loop = asyncio.get_running_loop()
        while b"\n" not in self._buffer:
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(self.fd, _wake, ready)
            try:
                await ready
            finally:
                loop.remove_reader(self.fd)
            chunk = os.read(self.fd, 4096)
            if not chunk:
                line, self._buffer = self._buffer, b""
                return line.decode(errors="replace")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace") + "\n"


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


@dataclass
class TerminalGate(ApprovalGate):
    """Asks y/n on the terminal from inside `wait`: the run is then waiting inside the pipeline,
    so Ctrl-C at the prompt cancels it there and events.jsonl ends with the cancellation."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    read_line: Callable[[], Awaitable[str]] | None = None
    live: Pausable | None = None

    async def wait(self, call: PendingCall) -> Decision:
        self.pending.pop(call.call_id, None)
        read_line = self.read_line or LineReader(sys.stdin.fileno()).readline
        if self.live is not None:
            self.live.stop()
        try:
            return await ask_on_terminal(call, self.out, read_line)
        finally:
            if self.live is not None:
                self.live.start()


async def ask_on_terminal(
    call: PendingCall, out: TextIO, read_line: Callable[[], Awaitable[str]], max_code_chars: int = 4000
) -> Decision:
    """Show the call (its code in full, up to a limit) and ask y/n until the answer is one of them.
    End of input (Ctrl-D, a closed stdin) is a denial, so a run never hangs on a dead terminal."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {"arguments": call.arguments}
    code = str(arguments.get("code", ""))
    shown = code if len(code) <= max_code_chars else code[:max_code_chars] + f"\n... ({len(code)} characters)"
    out.write(f"\n{call.tool} wants to run model-written code ({arguments.get('filename', '?')}):\n")
    out.write("".join(f"    {line}\n" for line in shown.splitlines()))
    if arguments.get("caption"):
        out.write(f"  caption: {arguments['caption']}\n")
    while True:
        out.write(f"Run it? [y/n] ({call.call_id}) ")
        out.flush()
        answer = await read_line()
        if not answer:  # end of input
            out.write("\n")
            return Decision(approve=False, reason="no answer (end of input)", by="terminal")
        reply = answer.strip().lower()
        if reply in ("y", "yes"):
            return Decision(approve=True, by="terminal")
        if reply in ("n", "no"):
            return Decision(approve=False, reason="denied at the terminal", by="terminal")
