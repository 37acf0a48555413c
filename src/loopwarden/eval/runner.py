"""Runs eval cases through the real `Agent`, concurrently, and turns each run into a
`CaseResult`: the facts the metrics need and the expectations that failed."""

from __future__ import annotations

import asyncio
import hashlib
import re
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..agent import Agent
from ..config import LoopConfig
from ..events import Event, GuardVerdict, ModelCalled, PhaseEnded, RunFinished, ToolCallProposed
from ..executor import RetryPolicy
from ..guard.budget import Budgets
from ..guard.ladder import Ladder
from ..trace.jsonl import write_jsonl
from .behaviour import build_model
from .case import Case, ConfigSpec
from .case_tools import build_checklist, build_tool
from .detectors import REPEATED_CALL, resolve_detectors
from .expect import check_expectations
from .turns import turn_facts
from .verifiers import build_verifiers

INTERVENTIONS = frozenset({"cached", "nudged", "narrowed", "stopped"})
"""Verdict actions that mean the guard stepped in against looping."""


class CaseResult(BaseModel):
    name: str
    intent: str
    path: str | None = None
    passed: bool
    reasons: list[str] = Field(default_factory=list)
    """Why it failed (empty when it passed)."""
    status: str = ""
    stop_reason: str = ""
    model_calls: int = 0
    tool_rounds: int = 0
    tool_executions: int = 0
    tokens: int = 0
    proposals: int = 0
    duplicate_proposals: int = 0
    candidates: list[int] = Field(default_factory=list)
    """Tools offered at each model call of the tool phase."""
    checklist: dict[str, bool] | None = None
    completed: bool = False
    fallback: bool = False
    guard_trips: list[str] = Field(default_factory=list)
    output: str | None = None
    kind: str | None = None
    """`healthy` or `loop` when the case says so."""
    first_intervention_turn: int | None = None
    stop_turn: int | None = None
    interventions: list[str] = Field(default_factory=list)
    """`detector:action` of each intervention in order (eval/turns.py says what counts)."""
    first_turns: dict[str, int] = Field(default_factory=dict)
    """Detector -> turn of its first intervention."""
    phase_model_calls: int = 0
    wrap_up_calls: int = 0
    rescued: bool = False

    @property
    def false_intervention(self) -> bool:
        """A case marked healthy on which the guard stepped in."""
        return self.kind == "healthy" and bool(self.interventions)


def loop_config(spec: ConfigSpec, disabled: Iterable[str]) -> LoopConfig:
    base = LoopConfig()
    ladder = Ladder(
        nudge_at=spec.nudge_at or base.ladder.nudge_at,
        narrow_at=spec.narrow_at or base.ladder.narrow_at,
        stop_at=spec.stop_at or base.ladder.stop_at,
    )
    if REPEATED_CALL in set(disabled):
        ladder = Ladder(nudge_at=10**9, narrow_at=10**9, stop_at=10**9)
    b = base.budgets
    budgets = Budgets(
        max_tool_rounds=spec.max_tool_rounds or b.max_tool_rounds,
        max_model_calls=spec.max_model_calls or b.max_model_calls,
        max_tokens=spec.max_tokens or b.max_tokens,
    )
    return replace(
        base,
        ladder=ladder,
        budgets=budgets,
        policy=spec.policy or base.policy,
        wrap_up=base.wrap_up if spec.wrap_up is None else spec.wrap_up,
        # Canned retryable failures are retried as in production, without the wall-clock wait.
        retry=RetryPolicy(max_attempts=base.retry.max_attempts, base_delay=0.0, max_delay=0.0),
        tool_timeout=10.0,
    )


def build_agent(case: Case, disabled: Sequence[str] = ()) -> Agent:
    off = [*disabled, *case.config.disable]
    case_dir = case.path.parent if case.path else Path.cwd()
    detectors = resolve_detectors(off)
    return Agent(
        model=build_model(case.model, case_dir),
        tools=[build_tool(t) for t in case.tools],
        system=case.system,
        config=loop_config(case.config, off),
        checklist=build_checklist(case.checklist),
        verifiers=build_verifiers(case.verifiers),
        detectors=detectors,
    )


async def run_case(case: Case, disabled: Sequence[str] = (), *, trace_dir: Path | None = None) -> CaseResult:
    """Run one case; a case that crashes the runtime fails with the traceback as its reason.
    With `trace_dir`, the run's events are written there as `<case name>.jsonl`."""
    try:
        agent = build_agent(case, disabled)
        run = await agent.run(case.input)
    except Exception as error:  # a crash is a finding, never the end of the eval
        where = traceback.format_exception_only(type(error), error)[-1].strip()
        return CaseResult(
            name=case.name,
            intent=case.intent,
            kind=case.kind,
            path=_path(case),
            passed=False,
            reasons=[f"crashed: {where}"],
        )
    if trace_dir is not None:
        await asyncio.to_thread(write_jsonl, run.events, trace_path(trace_dir, case.name))
    checklist = run.state.checklist.snapshot() if run.state.checklist else None
    result = summarise(case, run.events, checklist)
    result.reasons = check_expectations(case, result, run.events)
    result.passed = not result.reasons
    return result


def summarise(case: Case, events: list[Event], checklist: dict[str, bool] | None) -> CaseResult:
    finished = next(e for e in reversed(events) if isinstance(e, RunFinished))
    seen: set[tuple[str, str]] = set()
    duplicates = 0
    for e in events:
        if isinstance(e, ToolCallProposed):
            key = (e.tool, e.args_hash)
            duplicates += key in seen
            seen.add(key)
    required_done = checklist is not None and all(checklist.values()) if checklist else False
    completed = required_done if case.checklist else finished.status == "completed"
    facts = turn_facts(events)
    return CaseResult(
        name=case.name,
        intent=case.intent,
        kind=case.kind,
        path=_path(case),
        passed=False,
        status=finished.status,
        stop_reason=finished.stop_reason,
        model_calls=finished.totals.model_calls,
        tool_rounds=finished.totals.tool_rounds,
        tool_executions=finished.totals.tool_executions,
        tokens=finished.totals.total_tokens,
        proposals=sum(isinstance(e, ToolCallProposed) for e in events),
        duplicate_proposals=duplicates,
        candidates=[e.n_tools_offered for e in events if isinstance(e, ModelCalled) and e.n_tools_offered],
        checklist=checklist,
        completed=completed,
        # A run rescued by a forced terminal call completed, but only through the fallback.
        fallback=facts.rescued or any(isinstance(e, PhaseEnded) and e.status != "completed" for e in events),
        guard_trips=sorted(
            {f"{e.detector}:{e.action}" for e in events if isinstance(e, GuardVerdict) and e.action in INTERVENTIONS}
        ),
        output=finished.output if isinstance(finished.output, str) else _short(finished.output),
        first_intervention_turn=facts.first_intervention_turn,
        stop_turn=facts.stop_turn,
        interventions=facts.interventions,
        first_turns=facts.first_turns,
        phase_model_calls=facts.phase_model_calls,
        wrap_up_calls=facts.wrap_up_calls,
        rescued=facts.rescued,
    )


async def run_cases(
    cases: Sequence[Case], *, disabled: Sequence[str] = (), concurrency: int = 8, trace_dir: Path | None = None
) -> list[CaseResult]:
    """Run cases concurrently (at most `concurrency` at a time); results in case order."""
    gate = asyncio.Semaphore(max(concurrency, 1))

    async def one(case: Case) -> CaseResult:
        async with gate:
            return await run_case(case, disabled, trace_dir=trace_dir)

    return list(await asyncio.gather(*(one(c) for c in cases)))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def trace_path(trace_dir: Path, name: str) -> Path:
    """Where a case's events go: always directly inside `trace_dir`, whatever the case name
    holds (`../x`, `a/b`, an absolute path); a name that had to be changed gets a short hash,
    so two names never share a file."""
    safe = _UNSAFE.sub("_", name).lstrip(".") or "case"
    if safe != name:
        safe = f"{safe[:80]}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    return trace_dir / f"{safe}.jsonl"


def _path(case: Case) -> str | None:
    if case.path is None:
        return None
    try:
        return case.path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return case.path.as_posix()


def _short(value: Any) -> str | None:
    return None if value is None else str(value)[:500]
