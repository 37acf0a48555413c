"""Per-intent numbers over a set of case results: how many tool rounds runs take (average and
P95), how often a call repeats an earlier identical one, how many tools the model is shown,
how often the work completes, how often a run ends through a fallback, and why runs stop.
Over the whole suite: false interventions (the guard stepping in on a case marked healthy) and,
per detector, the loop cases it caught, the turn of its first intervention and its false ones."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import BaseModel

from .runner import CaseResult


class IntentMetrics(BaseModel):
    intent: str
    cases: int
    passed: int
    avg_tool_rounds: float
    p95_tool_rounds: float
    duplicate_call_rate: float
    """Proposals identical (tool and arguments) to an earlier one of the same run, over all proposals."""
    avg_candidates: float
    """Tools offered per model call of the tool phase."""
    completion_rate: float
    """Runs whose checklist was completed (or, without a checklist, that completed)."""
    fallback_rate: float
    """Runs ended by a guard or budget stop (then degraded, failed or paused), or rescued by a
    forced terminal call, instead of finishing on their own."""
    stop_reasons: dict[str, int]
    healthy_cases: int = 0
    false_interventions: int = 0
    """Cases marked healthy on which the guard stepped in."""
    false_intervention_rate: float = 0.0


class DetectorMetrics(BaseModel):
    detector: str
    loops_caught: int
    """Loop cases on which it stepped in."""
    first_turn_median: float | None
    """Turn of its first intervention on those cases: median and worst."""
    first_turn_worst: int | None
    false_interventions: int
    """Healthy cases on which it stepped in."""


class SuiteMetrics(BaseModel):
    cases: int = 0
    loop_cases: int = 0
    loops_caught: int = 0
    """Loop cases stopped or steered."""
    healthy_cases: int = 0
    false_interventions: int = 0
    false_intervention_rate: float = 0.0
    false_intervention_cases: list[str] = []
    detectors: list[DetectorMetrics] = []


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return float(ordered[rank - 1])


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def intent_metrics(intent: str, results: Sequence[CaseResult]) -> IntentMetrics:
    rounds = [r.tool_rounds for r in results]
    candidates = [c for r in results for c in r.candidates]
    return IntentMetrics(
        intent=intent,
        cases=len(results),
        passed=sum(r.passed for r in results),
        avg_tool_rounds=_ratio(sum(rounds), len(rounds)),
        p95_tool_rounds=percentile(rounds, 95),
        duplicate_call_rate=_ratio(sum(r.duplicate_proposals for r in results), sum(r.proposals for r in results)),
        avg_candidates=_ratio(sum(candidates), len(candidates)),
        completion_rate=_ratio(sum(r.completed for r in results), len(results)),
        fallback_rate=_ratio(sum(r.fallback for r in results), len(results)),
        stop_reasons=dict(Counter(r.stop_reason for r in results).most_common()),
        healthy_cases=sum(r.kind == "healthy" for r in results),
        false_interventions=sum(r.false_intervention for r in results),
        false_intervention_rate=_ratio(
            sum(r.false_intervention for r in results), sum(r.kind == "healthy" for r in results)
        ),
    )


def _first_turns(results: Sequence[CaseResult], detector: str) -> list[int]:
    """Per result, the turn of the detector's first intervention (from the trace's order)."""
    return [r.first_turns[detector] for r in results if detector in r.first_turns]


def suite_metrics(results: Sequence[CaseResult]) -> SuiteMetrics:
    loops = [r for r in results if r.kind == "loop"]
    healthy = [r for r in results if r.kind == "healthy"]
    names = sorted({d for r in [*loops, *healthy] for d in r.first_turns})
    detectors = []
    for name in names:
        turns = _first_turns(loops, name)
        detectors.append(
            DetectorMetrics(
                detector=name,
                loops_caught=len(turns),
                first_turn_median=statistics.median(turns) if turns else None,
                first_turn_worst=max(turns) if turns else None,
                false_interventions=len(_first_turns(healthy, name)),
            )
        )
    false = [r.name for r in healthy if r.false_intervention]
    return SuiteMetrics(
        cases=len(results),
        loop_cases=len(loops),
        loops_caught=sum(bool(r.interventions) for r in loops),
        healthy_cases=len(healthy),
        false_interventions=len(false),
        false_intervention_rate=_ratio(len(false), len(healthy)),
        false_intervention_cases=sorted(false),
        detectors=detectors,
    )


def metrics_by_intent(results: Sequence[CaseResult]) -> list[IntentMetrics]:
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        groups[result.intent].append(result)
    return [intent_metrics(intent, groups[intent]) for intent in sorted(groups)]
