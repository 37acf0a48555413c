"""Monologue: the model keeps talking instead of acting.

Counted are consecutive replies with text and no tool call, while tools are offered and the
task is not done: a declared checklist still has open items, or a terminal tool is offered and
has not been called (a phase with a finishing tool ends when it is called). "I will now read
the file." followed by nothing, again and again, is a run that has stopped working without
ending. Narrowing here asks for a tool call (the terminal tool when there is one, else
`tool_choice="required"`) rather than taking tools away.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .detector import Detector
from .ladder import Finding, Ladder, Rung, shared_ladder

if TYPE_CHECKING:
    from ..state import CallRecord, RunState

PENDING_TERMINAL = "pending_terminal"
"""`RunState.data` key: the terminal tools offered and not called yet (kept by the loop)."""


def open_work(state: RunState) -> list[str]:
    """What is left before the phase is done: open checklist items, else calling a terminal tool."""
    if state.checklist is not None and state.task_open:
        return state.checklist.missing
    pending: list[str] = state.data.get(PENDING_TERMINAL) or []
    return [f"call {' or '.join(pending)}"] if pending else []


MONOLOGUE_NUDGE = (
    "You have replied several times without calling a tool, and the task is not done. "
    "Do not describe what you will do: call the tool that does the next step now."
)


class MonologueDetector(Detector):
    name = "monologue"
    stop_reason = "monologue"

    def __init__(self, *, replies: int = 2, ladder: Ladder | None = None) -> None:
        self.ladder = ladder or shared_ladder(replies, replies + 1, replies + 2)
        self._streak: list[str] = []

    def on_calls(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        if self._streak:  # (not a new empty list every turn)
            self._streak = []
        return None

    def on_text(self, turn: int, text: str, tools_offered: bool, state: RunState) -> Finding | None:
        last = state.replies[-1] if state.replies else None
        missing = open_work(state) if tools_offered else []
        if last is None or last.turn != turn or last.n_calls or not missing:
            self._streak = []
            return None
        self._streak.append(text)
        rung = self.ladder.rung(len(self._streak))
        if rung == Rung.NONE:
            return None
        return Finding(
            detector=self.name,
            rung=rung,
            reason=f"{len(self._streak)} replies in a row without a tool call; still to do: {', '.join(missing)}",
            stop_reason=self.stop_reason,
            evidence=[t[:200] for t in self._streak[-5:]],
            count=len(self._streak),
            nudge=MONOLOGUE_NUDGE,
            require_call=True,
        )
