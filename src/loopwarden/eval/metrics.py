"""Per-intent numbers over a set of case results: how many tool rounds runs take (average and
P95), how often a call repeats an earlier identical one, how many tools the model is shown,
how often the work completes, how often a run ends through a fallback, and why runs stop."""

from __future__ import annotations

import math
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
    """Runs ended by a guard or budget stop (then degraded, failed or paused) instead of finishing."""
    stop_reasons: dict[str, int]


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
    )


def metrics_by_intent(results: Sequence[CaseResult]) -> list[IntentMetrics]:
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        groups[result.intent].append(result)
    return [intent_metrics(intent, groups[intent]) for intent in sorted(groups)]
