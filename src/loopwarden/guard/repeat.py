"""The repeated-call ladder: the collapse breaker.

Counted per fingerprint per run. A repeat of a call whose result is known is answered from
that result instead of running again; further repeats steer, narrow, then stop the phase.
`repeatable` tools (polling) are exempt, `terminal` tools are never counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..events import VerdictAction
from ..tools import Tool, ToolResult
from .ladder import Ladder, Rung

DETECTOR = "repeated_call"

_ACTION_FOR_RUNG: dict[Rung, VerdictAction] = {
    Rung.NUDGE: "nudged",
    Rung.NARROW: "narrowed",
    Rung.STOP: "stopped",
}


@dataclass(frozen=True)
class RepeatDecision:
    action: VerdictAction
    count: int
    cached: ToolResult | None = None
    first_turn: int | None = None

    @property
    def executes(self) -> bool:
        return self.action != "stopped" and self.cached is None


@dataclass
class _Known:
    result: ToolResult
    turn: int


class RepeatGuard:
    def __init__(self, ladder: Ladder | None = None) -> None:
        self.ladder = ladder or Ladder()
        self._counts: Counter[str] = Counter()
        self._known: dict[str, _Known] = {}
        self._first_turn: dict[str, int] = {}

    def check(self, fp: str, tool: Tool, turn: int) -> RepeatDecision:
        """Count this proposal and decide; call once per proposed call."""
        if tool.repeatable or tool.terminal:
            return RepeatDecision("allowed", 0)
        self._counts[fp] += 1
        count = self._counts[fp]
        self._first_turn.setdefault(fp, turn)
        known = self._known.get(fp)
        cached = known.result if known else None
        if count == 1:
            return RepeatDecision("allowed", count)
        rung = self.ladder.rung(count)
        if rung == Rung.NUDGE and count > self.ladder.nudge_at:
            rung = Rung.NONE  # the wrap-up instruction is given once; later repeats are just answered
        action: VerdictAction = _ACTION_FOR_RUNG.get(rung, "cached" if cached else "allowed")
        return RepeatDecision(action, count, cached, self._first_turn[fp])

    def check_unknown(self, fp: str, turn: int) -> RepeatDecision:
        """Proposals of tools that do not exist are counted too: collapse on them is collapse."""
        self._counts[fp] += 1
        count = self._counts[fp]
        rung = self.ladder.rung(count)
        return RepeatDecision(_ACTION_FOR_RUNG.get(rung, "allowed"), count)

    def record(self, fp: str, tool: Tool, result: ToolResult, turn: int) -> None:
        """Remember an executed result; a successful write makes every known result stale."""
        if tool.repeatable or tool.terminal:
            return
        if tool.side_effect == "write" and result.ok:
            self._known.clear()
        if not result.retryable:
            self._known[fp] = _Known(result, turn)

    def count(self, fp: str) -> int:
        return self._counts[fp]


def repeat_notice(result: ToolResult, count: int, first_turn: int | None) -> ToolResult:
    """The earlier result, marked so the model knows it asked the same thing again."""
    where = f" in turn {first_turn}" if first_turn is not None else ""
    note = (
        f"[repeated call #{count}: this exact call was already made{where}; it was not run again. "
        "The result below is unchanged. Use it, or do something different.]"
    )
    message = f"{note} {result.message}" if result.message else note
    return result.model_copy(update={"message": message})
