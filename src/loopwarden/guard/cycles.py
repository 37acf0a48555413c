"""Cycles: the same short sequence of calls over and over (A-B-A-B, A-B-C-A-B-C, ...).

The call sequence is the run's fingerprints in order. After each turn the detector looks for
the period p (2..max_period) whose repetition explains the longest tail of the sequence; when
that tail holds at least `min_repeats` full periods, the run is cycling. Every further
`escalate_after` calls (3; a full period if shorter) that go on with it climb one rung (steer,
narrow, stop). A cycle that is interrupted by other work and then re-established within the
window is the same cycle: it resumes one rung higher instead of starting over (unless the
interruption brought something new: then it starts over). Period 1 (the
same call again) is the repeated-call ladder's job, not this one's.

A cycle whose last period brought something new (a result not seen before, a new write, a
sentence the model had not said: guard/novelty.py) is a revisit, not a loop, and is left alone
while that lasts: a model that re-reads two files while its notes move on is working.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .detector import Detector
from .ladder import Finding, Ladder, shared_ladder
from .novelty import novelty_of

if TYPE_CHECKING:
    from ..state import CallRecord, RunState

CYCLE_NUDGE = (
    "You are going around in a cycle: the same sequence of tool calls keeps coming back with the same "
    "results. Do not start it again. Use what those calls already returned, try a different approach, "
    "or give your final answer."
)


@dataclass(frozen=True)
class Cycle:
    pattern: tuple[str, ...]
    """One period, in the order it last occurred."""
    span: int
    """How many trailing calls the repetition explains."""

    @property
    def period(self) -> int:
        return len(self.pattern)

    @property
    def repeats(self) -> int:
        return self.span // self.period

    @property
    def key(self) -> tuple[str, ...]:
        """Rotation-independent identity: A-B and B-A are one cycle."""
        rotations = [self.pattern[i:] + self.pattern[:i] for i in range(self.period)]
        return min(rotations)


def _primitive(pattern: Sequence[str]) -> bool:
    """Not itself a repetition of a shorter pattern (A-B-A-B is A-B twice, A-A is A)."""
    n = len(pattern)
    return not any(n % d == 0 and list(pattern[d:]) == list(pattern[:-d]) for d in range(1, n))


def tail_cycle(sequence: Sequence[str], max_period: int, min_repeats: int = 2) -> Cycle | None:
    """Of the repetitions ending the sequence with at least `min_repeats` full periods, the one
    that explains the longest tail (ties: the shortest period); None when there is none."""
    if min_repeats >= 2 and sequence and sequence[-1] not in sequence[-max_period - 1 : -2]:
        return None  # no period of 2..max_period ends in a repeat of the last call: nothing can repeat
    best: Cycle | None = None
    for period in range(2, max_period + 1):
        if len(sequence) < period:
            break
        span = period
        while span < len(sequence) and sequence[-span - 1] == sequence[-span - 1 + period]:
            span += 1
        if span // period < min_repeats:
            continue
        pattern = tuple(sequence[-period:])
        if not _primitive(pattern):
            continue
        if best is None or span > best.span:
            best = Cycle(pattern, span)
    return best


class CycleDetector(Detector):
    name = "cycle"
    stop_reason = "cycle"

    def __init__(
        self,
        *,
        max_period: int = 8,
        min_repeats: int = 2,
        escalate_after: int = 3,
        window: int | None = None,
        ladder: Ladder | None = None,
    ) -> None:
        if max_period < 2 or min_repeats < 2:
            raise ValueError("a cycle needs a period of at least 2 and at least 2 repeats")
        self.max_period = max_period
        self.min_repeats = min_repeats
        self.escalate_after = escalate_after
        """Calls that must continue a cycle before the next rung (a full period if shorter)."""
        self.window = window if window is not None else 4 * max_period
        self.ladder = ladder or shared_ladder(1, 2, 3)
        self._sequence: list[str] = []  # the most recent calls only
        self._news: list[int] = []  # the run's novelty when each of them was proposed
        self._position = 0  # calls seen in the run
        self._seen_at: dict[str, int] = {}
        """Each fingerprint's latest position: whether the last call recurs within a period."""
        self._tools: dict[str, str] = {}
        self._level: dict[tuple[str, ...], int] = {}
        self._last_seen: dict[tuple[str, ...], int] = {}
        self._current: tuple[tuple[str, ...], int] | None = None  # (key, position of its last rung)
        self._resumed = False
        self._level_news: dict[tuple[str, ...], int] = {}  # novelty when a cycle last climbed

    def on_calls(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        novelty = novelty_of(state)
        news = novelty.results + novelty.text  # Novelty.total, without the property's call
        seen_at, since, counted = self._seen_at, 0, False
        for record in records:
            if not record.exempt:
                fp = record.fingerprint
                self._sequence.append(fp)
                self._news.append(news)
                self._tools[fp] = record.tool
                self._position = position = self._position + 1
                previous = seen_at.get(fp)
                since = 0 if previous is None else position - previous  # calls since it was last made
                seen_at[fp] = position
                counted = True
        if not counted:
            return None
        sequence, kept, max_period = self._sequence, self.window + self.max_period, self.max_period
        if len(sequence) > 2 * kept:  # trimmed now and then (the window is read through its last `kept`)
            del sequence[:-kept]
            del self._news[:-kept]
        # tail_cycle's own first check, made here (min_repeats >= 2): when the last call does not
        # recur within a period, nothing can repeat. Its last earlier place says so (no slice to
        # make and search), unless that was the call just before: then an earlier one may be.
        recurs = sequence[-1] in sequence[-max_period - 1 : -2] if since == 1 else 2 <= since <= max_period
        cycle = tail_cycle(sequence[-kept:], max_period, self.min_repeats) if recurs else None
        if cycle is None or news > self._news[-cycle.period]:
            self._current = None  # no cycle, or its last period brought something new
            return None
        return self._escalate(cycle, turn, self._news[-cycle.span], news)

    def _escalate(self, cycle: Cycle, turn: int, news_at_start: int, news: int) -> Finding | None:
        key, position = cycle.key, self._position
        last_seen, self._last_seen[key] = self._last_seen.get(key), position
        if self._current is not None and self._current[0] == key:
            if position - self._current[1] < min(cycle.period, self.escalate_after):
                return None  # the model has not had the calls to act on the last rung yet
        else:
            if (
                last_seen is None
                or position - last_seen > self.window + cycle.span
                or news_at_start > self._level_news.get(key, news_at_start)
            ):
                self._level.pop(key, None)  # new, seen too long ago, or the work in between taught something
            self._resumed = key in self._level
        self._current = (key, position)
        self._level_news[key] = news
        level = self._level.get(key, 0) + 1
        self._level[key] = level
        rung = self.ladder.rung(level)
        tools = frozenset(self._tools[fp] for fp in cycle.pattern)
        resumed = " (resumed after other work)" if self._resumed else ""
        return Finding(
            detector=self.name,
            rung=rung,
            reason=(
                f"a cycle of {cycle.period} calls repeated {cycle.repeats} times{resumed}: "
                + " -> ".join(fp.split(":", 1)[0] for fp in cycle.pattern)
            ),
            stop_reason=self.stop_reason,
            evidence=list(cycle.pattern),
            tools=tools,
            count=cycle.repeats,
            nudge=CYCLE_NUDGE,
        )
