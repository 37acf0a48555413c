"""Case-level diff against a baseline report: what flipped, regressions first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from .metrics import IntentMetrics
from .runner import CaseResult

Outcome = Literal["pass", "fail", "absent"]
Change = Literal["regressed", "fixed", "new", "not_run", "unchanged"]
ORDER: dict[Change, int] = {"regressed": 0, "fixed": 1, "new": 2, "not_run": 3, "unchanged": 4}


class CaseDiff(BaseModel):
    name: str
    before: Outcome
    after: Outcome
    change: Change
    reasons: list[str]
    """Why it fails now (for a regression), or why it failed before (for a fix)."""


def _outcome(result: CaseResult | None) -> Outcome:
    return "absent" if result is None else "pass" if result.passed else "fail"


def _change(before: Outcome, after: Outcome) -> Change:
    if before == "pass" and after == "fail":
        return "regressed"
    if before == "fail" and after == "pass":
        return "fixed"
    if before == "absent":
        return "new"
    if after == "absent":
        return "not_run"
    return "unchanged"


def diff_results(baseline: Sequence[CaseResult], current: Sequence[CaseResult]) -> list[CaseDiff]:
    """One entry per case in either set, regressions first, then fixes, new, not run, unchanged."""
    before = {r.name: r for r in baseline}
    after = {r.name: r for r in current}
    diffs = []
    for name in dict.fromkeys([*after, *before]):
        old, new = before.get(name), after.get(name)
        change = _change(_outcome(old), _outcome(new))
        reasons = (new.reasons if new else []) if change != "fixed" else (old.reasons if old else [])
        diffs.append(CaseDiff(name=name, before=_outcome(old), after=_outcome(new), change=change, reasons=reasons))
    return sorted(diffs, key=lambda d: (ORDER[d.change], d.name))


METRICS = (
    "avg_tool_rounds",
    "p95_tool_rounds",
    "duplicate_call_rate",
    "avg_candidates",
    "completion_rate",
    "fallback_rate",
)


class MetricDelta(BaseModel):
    intent: str
    metric: str
    before: float
    after: float


def metric_deltas(baseline: Sequence[IntentMetrics], current: Sequence[IntentMetrics]) -> list[MetricDelta]:
    """The per-intent numbers that moved, for intents in both reports."""
    before = {m.intent: m for m in baseline}
    deltas = []
    for now in current:
        then = before.get(now.intent)
        if then is None:
            continue
        for metric in METRICS:
            old, new = float(getattr(then, metric)), float(getattr(now, metric))
            if abs(new - old) > 1e-9:
                deltas.append(MetricDelta(intent=now.intent, metric=metric, before=old, after=new))
    return deltas


def regressions(diffs: Sequence[CaseDiff]) -> list[CaseDiff]:
    return [d for d in diffs if d.change == "regressed"]
