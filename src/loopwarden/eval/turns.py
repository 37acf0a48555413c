"""Turn-level facts of a run, read from its events: when the guard first stepped in, when the
tool phase was stopped, which detectors stepped in (in order), and how many model calls the
phase took apart from the wrap-up after it. A turn is one model call, numbered from 1.

What counts as an intervention: every guard verdict other than `allowed`, except a `cached`
answer (an identical read answered from its earlier result is right, not steering) and the
refusal of a malformed call (an unknown tool, arguments that are not JSON or break the
schema, a tool not offered or not permitted, a slot contradiction): those answer a wrong call,
they do not judge the run. A stop of the phase by a guard or a budget is one too (a pause
for approval or a failing model is not the guard's doing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..events import Event, GuardVerdict, ModelCalled, PhaseEnded, RunFinished

CALL_REFUSALS = frozenset({"schema", "unknown_tool", "permission", "slots"})
"""Detectors whose `refused` verdict answers a malformed call: not an intervention."""
NOT_GUARD_STOPS = frozenset({"approval_required", "model_error"})


def is_intervention(verdict: GuardVerdict) -> bool:
    if verdict.action in ("allowed", "cached", "paused"):
        return False
    return not (verdict.action == "refused" and verdict.detector in CALL_REFUSALS)


@dataclass
class TurnFacts:
    first_intervention_turn: int | None = None
    stop_turn: int | None = None
    """The turn in which the phase was stopped by a guard or a budget (None: not stopped)."""
    interventions: list[str] = field(default_factory=list)
    """`detector:action` of every intervention, in order (a phase stop by a budget as `reason:stopped`)."""
    first_turns: dict[str, int] = field(default_factory=dict)
    """Each detector that stepped in -> the turn it first did (in the order they did)."""
    phase_model_calls: int = 0
    wrap_up_calls: int = 0
    rescued: bool = False

    def step_in(self, detector: str, action: str, turn: int) -> None:
        self.interventions.append(f"{detector}:{action}")
        self.first_turns.setdefault(detector, turn)
        if self.first_intervention_turn is None:
            self.first_intervention_turn = turn


def turn_facts(events: Iterable[Event]) -> TurnFacts:
    facts = TurnFacts()
    turn, ended = 0, False
    for e in events:
        if isinstance(e, ModelCalled):
            turn = e.turn
            if ended:
                facts.wrap_up_calls += 1
            else:
                facts.phase_model_calls += 1
        elif isinstance(e, GuardVerdict) and not ended and is_intervention(e):
            facts.step_in(e.detector, e.action, e.turn or turn)
        elif isinstance(e, PhaseEnded) and not ended:
            ended = True
            if e.status != "completed":
                facts.stop_turn = turn
                if e.stop_reason in NOT_GUARD_STOPS:
                    continue
                if e.stop_reason not in facts.first_turns:
                    facts.step_in(e.stop_reason, "stopped", turn)
        elif isinstance(e, RunFinished):
            facts.rescued = bool(getattr(e, "rescued", False))
    return facts
