"""Error loops: the same tool failing the same way again and again.

Failures are counted per (tool, error type), so retries with slightly different arguments or
error text still add up; a success of that tool clears its counts (a crawler that meets a 404
now and then is working). The same call failing with the same error a second time is flagged at
once: nothing about it changed, so nothing about the outcome will.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .detector import Detector
from .ladder import Finding, Ladder, Rung, shared_ladder

if TYPE_CHECKING:
    from ..state import CallRecord, RunState

ERROR_LOOP_NUDGE = (
    "The same tool keeps failing with the same kind of error. Retrying it with small changes will not help. "
    "Read the error, change your approach (another tool, other inputs), or report the problem in your answer."
)

_DIGITS = re.compile(r"\d+")


def _same_error_text(message: str | None) -> str:
    """Error text with numbers masked: "line 12" and "line 13" are one error."""
    return _DIGITS.sub("#", (message or "").strip().lower())


class ErrorLoopDetector(Detector):
    name = "error_loop"
    stop_reason = "error_loop"

    def __init__(self, *, ladder: Ladder | None = None) -> None:
        self.ladder = ladder or shared_ladder(3, 4, 5)
        self._counts: dict[tuple[str, str], int] = {}  # a Counter's own __init__ is a Python call per run
        self._last_error: dict[tuple[str, str], str] = {}  # (fingerprint, error type) -> error text
        self._examples: dict[tuple[str, str], list[str]] = {}

    def on_results(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        if not self._counts and len(records) == 1 and (result := records[0].result) is not None and result.ok:
            return None  # the common turn: one success, no failure counted to clear (as _observe says)
        worst: Finding | None = None
        for record in records:
            finding = self._observe(record)
            if finding is not None and (worst is None or _order(finding.rung) > _order(worst.rung)):
                worst = finding
        return worst

    def _observe(self, record: CallRecord) -> Finding | None:
        result = record.result
        if result is None or record.exempt or result.error_type == "repeated_call":
            return None
        if result.ok:
            if not self._counts:  # the common result: no failure counted to clear
                return None
            for key in [k for k in self._counts if k[0] == record.tool]:
                del self._counts[key]
                self._examples.pop(key, None)
            return None
        key = (record.tool, result.error_type or "error")
        count = self._counts[key] = self._counts.get(key, 0) + 1
        examples = self._examples.setdefault(key, [])
        examples.append(f"{record.fingerprint} -> {result.error_type}: {(result.message or '')[:200]}")
        del examples[:-5]
        # A cached answer is the earlier failure itself (its text carries a repeat notice).
        text = _same_error_text(result.message)
        earlier = self._last_error.get((record.fingerprint, key[1]))
        identical = earlier is not None and (record.cached or earlier == text)
        if not record.cached:
            self._last_error[(record.fingerprint, key[1])] = text
        rung = self.ladder.rung(count)
        why = [f"failed {count} times in a row with {key[1]}"] if rung != Rung.NONE else []
        if identical:
            why.append(f"the same call failed identically again ({key[1]})")
            rung = max(rung, Rung.NUDGE, key=_order)
        if rung == Rung.NONE:
            return None
        return Finding(
            detector=self.name,
            rung=rung,
            reason=f"{record.tool} " + "; ".join(why),
            stop_reason=self.stop_reason,
            evidence=list(examples),
            tools=frozenset({record.tool}),
            count=count,
            nudge=ERROR_LOOP_NUDGE,
        )


def _order(rung: Rung) -> int:
    return [Rung.NONE, Rung.NUDGE, Rung.NARROW, Rung.STOP].index(rung)
