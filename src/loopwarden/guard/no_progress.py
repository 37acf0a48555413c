"""No progress: rounds that add nothing new, however different their calls look.

A round makes progress when it completes a checklist item, runs a call that returns result
content not seen before in the run, or makes a new write; refused calls are never progress.
Result content is compared after volatile fields (timestamps, ids, durations) are stripped,
so `git status`, `git status --long` and `git --no-pager status` returning the same tree are
one result seen three times. Rounds whose
calls were all answered from the cache are left to the repeated-call ladder and not counted.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from .detector import Detector
from .ladder import Finding, Ladder, Rung

if TYPE_CHECKING:
    from ..state import CallRecord, RunState
    from ..tools import ToolResult

NO_PROGRESS_NUDGE = (
    "Your last rounds of tool calls returned nothing new: different calls, same results. "
    "Repeating them in other words will not change the answer. Use what you have, try something that "
    "can return new information, or give your final answer."
)

VOLATILE_KEY = re.compile(
    r"^(id|uuid|guid|etag|nonce|ts|timestamp|time|date|datetime|created|updated|modified|elapsed|duration|took"
    r"|latency|request_?id|trace_?id|span_?id|run_?id|call_?id|session_?id)$"
    r"|(_id|_at|_ts|_time|_ms|_seconds)$",
    re.IGNORECASE,
)
_VOLATILE_TEXT = re.compile(
    r"(?=[0-9a-fA-F])(?:"  # every alternative starts with a hex digit: other positions fail fast
    + "|".join(
        [
            r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?",  # ISO date(-time)
            r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b",  # clock time
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",  # uuid
            r"\b[0-9a-fA-F]{16,}\b",  # long hex ids, hashes
            r"\b\d{10,}\b",  # epoch seconds / milliseconds
            r"\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b",  # durations
        ]
    )
    + ")"
)


def _strip_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_volatile(v) for k, v in value.items() if not VOLATILE_KEY.search(str(k))}
    if isinstance(value, list | tuple):
        return [_strip_volatile(v) for v in value]
    if isinstance(value, str):
        return " ".join(_VOLATILE_TEXT.sub("<v>", value).split())
    return value


def content_hash(result: ToolResult) -> str:
    """A hash of what a result says, without the parts that change on every call."""
    payload = {
        "ok": result.ok,
        "error_type": result.error_type,
        "message": _strip_volatile(result.message),
        "data": _strip_volatile(result.data),
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class NoProgressDetector(Detector):
    name = "no_progress"
    stop_reason = "no_progress"

    def __init__(self, *, rounds: int = 3, ladder: Ladder | None = None) -> None:
        self.ladder = ladder or Ladder(nudge_at=rounds, narrow_at=rounds + 1, stop_at=rounds + 2)
        self._seen: set[str] = set()
        self._writes: set[str] = set()
        self._stale = 0
        self._stale_calls: list[CallRecord] = []

    def on_results(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        fresh = [r for r in records if not r.cached and not r.exempt and r.result is not None]
        if not fresh:
            return None  # all answered from the cache (the repeated-call ladder's case) or polling
        progressed = self._checklist_moved(turn, state)
        for record in fresh:
            assert record.result is not None
            if not record.executed:
                continue  # a refusal (not offered, bad arguments) tells nothing new about the task
            digest = content_hash(record.result)
            if digest not in self._seen:
                self._seen.add(digest)
                progressed = True
            if record.writes and record.result.ok and record.fingerprint not in self._writes:
                self._writes.add(record.fingerprint)
                progressed = True
        if progressed:
            self._stale, self._stale_calls = 0, []
            return None
        self._stale += 1
        self._stale_calls = (self._stale_calls + fresh)[-8:]
        rung = self.ladder.rung(self._stale)
        if rung == Rung.NONE:
            return None
        return Finding(
            detector=self.name,
            rung=rung,
            reason=f"{self._stale} rounds in a row returned nothing new",
            stop_reason=self.stop_reason,
            evidence=[r.fingerprint for r in self._stale_calls],
            tools=frozenset(r.tool for r in self._stale_calls),
            count=self._stale,
            nudge=NO_PROGRESS_NUDGE,
        )

    @staticmethod
    def _checklist_moved(turn: int, state: RunState) -> bool:
        checklist = state.checklist
        return checklist is not None and any(done_turn == turn for done_turn in checklist.done.values())
