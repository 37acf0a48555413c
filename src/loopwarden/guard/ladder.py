"""The escalation ladder every detector answers with: steer once, narrow, stop."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

from ..hotpath.frozen import quick_init


class Rung(StrEnum):
    NONE = "none"
    NUDGE = "nudge"
    NARROW = "narrow"
    STOP = "stop"


@quick_init  # built per run (a config's default, each detector's own)
@dataclass(frozen=True)
class Ladder:
    """Counts at which a detector steers, narrows and stops (1-based occurrence counts)."""

    nudge_at: int = 3
    narrow_at: int = 4
    stop_at: int = 5

    def rung(self, count: int) -> Rung:
        if count >= self.stop_at:
            return Rung.STOP
        if count >= self.narrow_at:
            return Rung.NARROW
        if count >= self.nudge_at:
            return Rung.NUDGE
        return Rung.NONE


@lru_cache(maxsize=64)
def shared_ladder(nudge_at: int, narrow_at: int, stop_at: int) -> Ladder:
    """One `Ladder` for these counts, shared: it is frozen and holds ints, so the detectors a run
    builds (five a run by default) need not make their own."""
    return Ladder(nudge_at=nudge_at, narrow_at=narrow_at, stop_at=stop_at)


@dataclass(frozen=True)
class Finding:
    """What a detector saw and the rung it asks for; turned into a verdict event by the loop."""

    detector: str
    rung: Rung
    reason: str
    stop_reason: str
    evidence: list[str] = field(default_factory=list)
    tools: frozenset[str] = frozenset()
    count: int | None = None
    nudge: str | None = None
    """The steering message for this detector; the loop's generic one when None."""
    require_call: bool = False
    """Narrowing asks for a tool call (`tool_choice="required"`) instead of removing tools."""
