"""Approving model-written code in a report run (`ReportConfig.approve_code`).

With `approve_code`, the exploration tool `make_figure` is declared `requires_approval`: each call
waits on the `ApprovalGate` given to `run_report` (the server's gate, or the CLI's terminal
prompt). Where no person can be asked (no gate, `--json`, no TTY) the call is denied with a
reason saying so, never left waiting and never run: the model reads the denial and goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TextIO

from ..approval import ApprovalGate, Decision, PendingCall
from ..events import ApprovalRequired
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


def ask_on_terminal(
    event: ApprovalRequired, out: TextIO, read_line: Callable[[], str], max_code_chars: int = 4000
) -> Decision:
    """Show the call (its code in full, up to a limit) and ask y/n until the answer is one of them.
    End of input (Ctrl-D, a closed stdin) is a denial, so a run never hangs on a dead terminal."""
    arguments = event.arguments if isinstance(event.arguments, dict) else {"arguments": event.arguments}
    code = str(arguments.get("code", ""))
    shown = code if len(code) <= max_code_chars else code[:max_code_chars] + f"\n... ({len(code)} characters)"
    out.write(f"\n{event.tool} wants to run model-written code ({arguments.get('filename', '?')}):\n")
    out.write("".join(f"    {line}\n" for line in shown.splitlines()))
    if arguments.get("caption"):
        out.write(f"  caption: {arguments['caption']}\n")
    while True:
        out.write(f"Run it? [y/n] ({event.call_id}) ")
        out.flush()
        try:
            answer = read_line()
        except EOFError:
            answer = ""
        if not answer:  # EOF: read_line returns "" (sys.stdin.readline) or raised EOFError
            out.write("\n")
            return Decision(approve=False, reason="no answer (end of input)", by="terminal")
        reply = answer.strip().lower()
        if reply in ("y", "yes"):
            return Decision(approve=True, by="terminal")
        if reply in ("n", "no"):
            return Decision(approve=False, reason="denied at the terminal", by="terminal")
