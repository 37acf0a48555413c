"""A whole eval: load the case files, run them concurrently, compute per-intent metrics, and
read or write the JSON report that later runs diff against as their baseline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from .case import Case, CaseError, collect_case_files, load_case
from .detectors import resolve_detectors
from .metrics import IntentMetrics, SuiteMetrics, metrics_by_intent, suite_metrics
from .runner import CaseResult, run_cases

REPORT_VERSION = 1


class EvalReport(BaseModel):
    version: int = REPORT_VERSION
    disabled: list[str] = Field(default_factory=list)
    cases: list[CaseResult]
    intents: list[IntentMetrics]
    suite: SuiteMetrics = Field(default_factory=SuiteMetrics)

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def failed(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed]


def load_cases(paths: Sequence[Path]) -> tuple[list[Case], list[CaseResult]]:
    """Cases that load, and a failed result for each file that does not (named after the file)."""
    cases, broken = [], []
    for path in collect_case_files(list(paths)):
        try:
            cases.append(load_case(path))
        except CaseError as error:
            broken.append(
                CaseResult(name=path.stem, intent="invalid", path=str(path), passed=False, reasons=[str(error)])
            )
    files: dict[str, list[str]] = {}
    for case in cases:
        files.setdefault(case.name, []).append(str(case.path))
    repeated = [f"{name!r} in {' and '.join(paths)}" for name, paths in files.items() if len(paths) > 1]
    if repeated:
        raise CaseError(f"case names must be unique: {'; '.join(repeated)}")
    if not cases and not broken:
        raise CaseError(f"no cases (*.yaml, *.yml) in {', '.join(str(p) for p in paths)}")
    return cases, broken


async def run_suite(
    paths: Sequence[Path], *, disabled: Sequence[str] = (), concurrency: int = 8, trace_dir: Path | None = None
) -> EvalReport:
    resolve_detectors(disabled)  # unknown names fail here, once, not in every case
    cases, broken = load_cases(paths)
    results = await run_cases(cases, disabled=disabled, concurrency=concurrency, trace_dir=trace_dir) + broken
    return EvalReport(
        disabled=list(disabled), cases=results, intents=metrics_by_intent(results), suite=suite_metrics(results)
    )


def load_report(path: Path) -> EvalReport:
    return EvalReport.model_validate_json(path.read_text(encoding="utf-8"))
