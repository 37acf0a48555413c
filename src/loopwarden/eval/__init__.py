"""The eval harness: YAML badcases run through the real runtime, per-intent loop metrics, and
a case-level diff against a baseline. `loopwarden eval PATH...` is its command."""

from .case import Case, CaseError, load_case
from .diff import CaseDiff, diff_results, regressions
from .metrics import IntentMetrics, metrics_by_intent
from .runner import CaseResult, run_case, run_cases
from .suite import EvalReport, load_report, run_suite

__all__ = [
    "Case",
    "CaseDiff",
    "CaseError",
    "CaseResult",
    "EvalReport",
    "IntentMetrics",
    "diff_results",
    "load_case",
    "load_report",
    "metrics_by_intent",
    "regressions",
    "run_case",
    "run_cases",
    "run_suite",
]
