"""No progress: the same thing asked again in other words, with nothing new coming back.

A round makes progress when it completes a checklist item, runs a call that returns result
content not seen before in the run (timestamps, ids and durations stripped: guard/novelty.py),
makes a new write (not the same write in other words: the same email to the same person with
its body reworded), or asks a new target and gets an answer. A round is stale when a call that
ran returned nothing new and either

- asked a target an earlier call of that tool already asked, in other words (guard/targets.py:
  `git status`, `git status --long` and `git --no-pager status`; rephrased searches), or
- asked a new target and came back empty or negative (no hits, `[]`, `false`, not found, a
  failure) where the target was a guess, not the next item of an enumeration (`build`, `dist`,
  `tmp`... all empty, versus `data/a.csv`, `data/b.csv`... each checked).

So a sweep of twelve hosts that each answer "ok" makes progress (twelve new targets answered),
while the same status asked five ways does not. The next item of an enumeration that comes back
empty (`site:pypi.org kisfeed`, then `... etfmaster`: no results, the names are free) is neither:
it does not count as stale, but once the run has been steered it no longer holds the count.
Refused calls are never progress; rounds whose
calls were all answered from the cache are left to the repeated-call ladder and not counted.
Three stale rounds in a row climb the ladder (steer, narrow, stop).
"""

from __future__ import annotations

import re
from collections import deque
from typing import TYPE_CHECKING, Any

from .detector import Detector
from .ladder import Finding, Ladder, Rung, shared_ladder
from .novelty import VOLATILE_KEY, content_hash, novelty_of
from .targets import same_target, systematic

if TYPE_CHECKING:
    from ..state import CallRecord, RunState
    from ..tools import ToolResult

__all__ = ["VOLATILE_KEY", "NoProgressDetector", "content_hash", "is_negative"]

NO_PROGRESS_NUDGE = (
    "Your last rounds of tool calls returned nothing new: different calls, same results. "
    "Repeating them in other words will not change the answer. Use what you have, try something that "
    "can return new information, or give your final answer."
)

_NEGATIVE_TEXT = re.compile(
    r"^\W*(no\b|not found|none\b|null\b|nil\b|empty\b|nothing\b|false\b|0 (results?|matches|hits|items|files|rows)\b"
    r"|does not exist|doesn't exist|no such|unknown\b|n/a\b)",
    re.IGNORECASE,
)


def is_negative(result: ToolResult) -> bool:
    """An answer that says nothing is there: a failure, empty data, no hits, `false`, not found."""
    return not result.ok or _empty(result.data)


def _empty(data: Any, depth: int = 0) -> bool:
    if data is None or data is False or data == 0:
        return True
    if isinstance(data, str):
        return not data.strip() or bool(_NEGATIVE_TEXT.match(data.strip()))
    if isinstance(data, list | tuple | set):
        return len(data) == 0
    if isinstance(data, dict):
        values = [v for k, v in data.items() if not VOLATILE_KEY.search(str(k))]
        return depth < 2 and all(_empty(v, depth + 1) for v in values)
    return False


class NoProgressDetector(Detector):
    name = "no_progress"
    stop_reason = "no_progress"

    def __init__(self, *, rounds: int = 3, window: int = 32, ladder: Ladder | None = None) -> None:
        self.ladder = ladder or shared_ladder(rounds, rounds + 1, rounds + 2)
        self.window = window
        """Earlier calls per tool that a call is compared with."""
        self._asked: dict[str, deque[Any]] = {}
        self._stale = 0
        self._stale_calls: list[CallRecord] = []

    def on_results(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        fresh: list[CallRecord] = []  # a loop, not a comprehension (a function and a frame of its own in 3.11)
        for r in records:
            if not r.cached and not r.exempt and r.result is not None:
                fresh.append(r)
        if not fresh:
            return None  # all answered from the cache (the repeated-call ladder's case) or polling
        novelty = novelty_of(state)
        progress, stale = state.checklist is not None and self._checklist_moved(turn, state), False  # outcomes seen
        for record in fresh:
            if not record.executed:
                stale = True  # a refusal (not offered, bad arguments) tells nothing new
                continue
            new, _, new_content = novelty.outcome(record)  # is_new and new_content at once
            outcome = self._outcome(record, new, new_content)
            progress, stale = progress or outcome == "progress", stale or outcome == "stale"
        if progress:
            if self._stale or self._stale_calls:
                self._stale, self._stale_calls = 0, []
            return None
        if not stale and self._stale < self.ladder.nudge_at:
            return None  # the next item of a sweep came back empty: neither stale nor progress
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

    def _outcome(self, record: CallRecord, new: bool, new_content: bool) -> str:
        """`progress` (new content, or a new target answered), `stale` (the same question in
        other words, or a guess that came back empty) or `neutral` (the next item of an
        enumeration came back empty: normal in a sweep, but no excuse once the run was steered)."""
        asked = self._asked.get(record.tool)
        if asked is None:
            asked = self._asked[record.tool] = deque(maxlen=self.window)
        arguments, previous = record.arguments, (asked[-1] if asked else None)
        asked.append(arguments)
        if new_content:
            return "progress"
        earlier = list(asked)[:-1]
        repeat = any(same_target(arguments, e) for e in earlier)  # only asked when nothing new came back
        if new and not repeat:
            return "progress"  # a write not made before
        if repeat:
            return "stale"  # the same question (or the same write) in other words, answered as before
        assert record.result is not None
        if not is_negative(record.result):
            return "progress"  # a new target that answered (a sweep: "ok" for each host)
        return "neutral" if previous is not None and systematic(previous, arguments) else "stale"

    @staticmethod
    def _checklist_moved(turn: int, state: RunState) -> bool:
        checklist = state.checklist
        return checklist is not None and any(done_turn == turn for done_turn in checklist.done.values())
