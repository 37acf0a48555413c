"""The repeated-call ladder: the collapse breaker.

Counted per fingerprint per run. A repeat of a call whose result is known is answered from
that result instead of running again; further repeats steer, narrow, then stop the phase.
`repeatable` tools (polling) are exempt, `terminal` tools are never counted.

A repeat climbs one rung unless something since this call was last made could make asking it
again worthwhile (guard/novelty.py):

- another call made a successful write (the world changed: re-running the tests after an edit);
- the call's own last run returned something different from the run before (a poll with progress);
- the model has both made other calls and said something new since (it is reasoning over what
  it re-reads, as in A, B, A, B, C, A, B), at most `text_allowance` times per call and never for
  a call asked again right after itself, so fresh narration over the same call ("still
  waiting...", "let me check again...") never holds it.

Such a repeat is still answered from the cache when its result is known, and holds its rung.
New results of other reads alone do not hold a repeat: they cannot change what an identical call
returns, so re-running one unchanged test after every new file read climbs as before (the 3rd
identical call steers, the 5th stops).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..events import VerdictAction
from ..hotpath.frozen import quick_init
from ..state import CallRecord
from ..tools import Tool, ToolResult
from .ladder import Ladder, Rung
from .novelty import Novelty

DETECTOR = "repeated_call"

_ACTION_FOR_RUNG: dict[Rung, VerdictAction] = {
    Rung.NUDGE: "nudged",
    Rung.NARROW: "narrowed",
    Rung.STOP: "stopped",
}


@quick_init
@dataclass(frozen=True, slots=True)
class RepeatDecision:
    action: VerdictAction
    count: int
    cached: ToolResult | None = None
    first_turn: int | None = None

    @property
    def executes(self) -> bool:
        return self.action != "stopped" and self.cached is None


# The two common decisions, made once: a frozen dataclass costs about 7,000 instructions to
# build (a call to object.__setattr__ per field), and these are equal to any built afresh.
_EXEMPT = RepeatDecision("allowed", 0)
_FIRST = RepeatDecision("allowed", 1)


class RepeatGuard:
    def __init__(self, ladder: Ladder | None = None, novelty: Novelty | None = None, text_allowance: int = 3) -> None:
        self.ladder = ladder or Ladder()
        self.novelty = novelty or Novelty()
        self.text_allowance = text_allowance
        self._counts: dict[str, int] = {}  # plain dicts: a Counter's __missing__ is a Python call per new call
        self._rung: dict[str, int] = {}  # where each fingerprint stands on the ladder
        self._after: dict[str, tuple[int, int]] = {}  # fingerprint -> (writes, text) once answered
        self._changed: set[str] = set()  # its last run returned something other than the run before
        self._digest: dict[str, str] = {}
        self._held_by_text: dict[str, int] = {}
        self._asks = 0  # proposals seen
        self._asked_at: dict[str, int] = {}
        self._known: dict[str, ToolResult] = {}  # the last result of each fingerprint, while it holds
        self._settled = (0, 0)  # the last (writes, text) in `_after`: kept as one tuple while it stands
        self._first_turn: dict[str, int] = {}

    def check(self, fp: str, tool: Tool, turn: int) -> RepeatDecision:
        """Count this proposal and decide; call once per proposed call."""
        if tool.repeatable or tool.terminal:
            return _EXEMPT
        self._counts[fp] = self._counts.get(fp, 0) + 1
        count = self._climb(fp)
        self._first_turn.setdefault(fp, turn)
        if count == 1:
            return _FIRST
        cached = self._known.get(fp)
        rung = self.ladder.rung(count)
        if rung == Rung.NUDGE and count > self.ladder.nudge_at:
            rung = Rung.NONE  # the wrap-up instruction is given once; later repeats are just answered
        action: VerdictAction = _ACTION_FOR_RUNG.get(rung, "cached" if cached else "allowed")
        return RepeatDecision(action, count, cached, self._first_turn[fp])

    def _climb(self, fp: str) -> int:
        """This ask's rung: 1 for the first, else one above the last unless the repeat is held."""
        self._asks += 1
        other_calls = self._asks - self._asked_at.get(fp, self._asks) > 1
        self._asked_at[fp] = self._asks
        if self._counts[fp] == 1:
            self._rung[fp] = 1
        elif self._held(fp, other_calls):
            self._rung[fp] = max(self._rung.get(fp, 0), 2)
        else:
            self._rung[fp] = self._rung.get(fp, 0) + 1
        return self._rung[fp]

    def _held(self, fp: str, other_calls: bool) -> bool:
        after = self._after.get(fp)
        if after is None:
            return False  # asked twice in one turn: nothing can have changed
        writes, text = after
        if self.novelty.writes > writes or fp in self._changed:
            return True
        if other_calls and self.novelty.text > text and (held := self._held_by_text.get(fp, 0)) < self.text_allowance:
            self._held_by_text[fp] = held + 1
            return True
        return False

    def settle(self, records: Iterable[CallRecord]) -> None:
        """After a turn's results were observed: what changes from here on comes after these calls."""
        novelty = self.novelty
        for record in records:
            fp = record.fingerprint
            settled = self._settled
            if settled[0] != novelty.writes or settled[1] != novelty.text:
                # One tuple while nothing changes, not one kept per call of the run.
                settled = self._settled = (novelty.writes, novelty.text)
            self._after[fp] = settled
            digest = self.novelty.digest_of(record)
            if digest is not None:
                previous, self._digest[fp] = self._digest.get(fp), digest
                if previous is not None and previous != digest:
                    self._changed.add(fp)
                else:
                    self._changed.discard(fp)

    def check_unknown(self, fp: str, turn: int) -> RepeatDecision:
        """Proposals of tools that do not exist are counted too: collapse on them is collapse."""
        self._counts[fp] = self._counts.get(fp, 0) + 1
        count = self._climb(fp)
        rung = self.ladder.rung(count)
        return RepeatDecision(_ACTION_FOR_RUNG.get(rung, "allowed"), count)

    def record(self, fp: str, tool: Tool, result: ToolResult, turn: int) -> None:
        """Remember an executed result; a successful write makes every known result stale."""
        if tool.repeatable or tool.terminal:
            return
        if tool.side_effect == "write" and result.ok:
            self._known.clear()
        if not result.retryable:
            self._known[fp] = result

    def count(self, fp: str) -> int:
        return self._counts.get(fp, 0)


def repeat_notice(result: ToolResult, count: int, first_turn: int | None) -> ToolResult:
    """The earlier result, marked so the model knows it asked the same thing again."""
    where = f" in turn {first_turn}" if first_turn is not None else ""
    note = (
        f"[repeated call #{count}: this exact call was already made{where}; it was not run again. "
        "The result below is unchanged. Use it, or do something different.]"
    )
    message = f"{note} {result.message}" if result.message else note
    return result.model_copy(update={"message": message})
