"""One trace read back as the facts a reviewer asks for: which intent, which tools were
offered (and how many), each call with its argument hash, result status and guard verdicts,
the checklist, why the run stopped and what it used."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from ..events import (
    Event,
    GuardVerdict,
    ModelCalled,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallProposed,
    Totals,
)


class CallSummary(BaseModel):
    turn: int
    call_id: str
    tool: str
    args_hash: str
    status: str = "pending"
    """ok, cached, or the error type of the result."""
    verdicts: list[str] = Field(default_factory=list)
    """`detector:action` of every verdict on this call."""


class TraceSummary(BaseModel):
    trace_id: str
    intent: str | None = None
    tools_offered: list[list[str]] = Field(default_factory=list)
    """The tools offered at each model call."""
    calls: list[CallSummary] = Field(default_factory=list)
    run_verdicts: list[str] = Field(default_factory=list)
    """Verdicts not about one call (cycles, stagnation, verifier...)."""
    checklist: dict[str, bool] | None = None
    status: str | None = None
    stop_reason: str | None = None
    totals: Totals | None = None

    @property
    def max_tools_offered(self) -> int:
        return max((len(t) for t in self.tools_offered), default=0)


def summarise_trace(events: Iterable[Event]) -> TraceSummary:
    summary: TraceSummary | None = None
    calls: dict[str, CallSummary] = {}
    for event in events:
        if summary is None:
            summary = TraceSummary(trace_id=event.run_id)
        _apply(summary, calls, event)
    if summary is None:
        raise ValueError("an empty trace has nothing to summarise")
    summary.calls = list(calls.values())
    return summary


def _apply(summary: TraceSummary, calls: dict[str, CallSummary], event: Event) -> None:
    if isinstance(event, RunStarted):
        summary.intent = event.intent
    elif isinstance(event, ModelCalled):
        summary.tools_offered.append(list(event.tools_offered))
    elif isinstance(event, ToolCallProposed):
        calls[event.call_id] = CallSummary(
            turn=event.turn, call_id=event.call_id, tool=event.tool, args_hash=event.args_hash
        )
    elif isinstance(event, GuardVerdict):
        target = calls.get(event.call_id) if event.call_id else None
        (target.verdicts if target else summary.run_verdicts).append(f"{event.detector}:{event.action}")
    elif isinstance(event, ToolCallFinished) and event.call_id in calls:
        calls[event.call_id].status = "ok" if event.ok and not event.cached else _status(event)
    elif isinstance(event, RunFinished):
        summary.status, summary.stop_reason = event.status, event.stop_reason
        summary.totals, summary.checklist = event.totals, event.checklist
    elif event.type == "intent_routed":
        summary.intent = _str(getattr(event, "intent", None)) or summary.intent


def _status(event: ToolCallFinished) -> str:
    if event.cached:
        return "cached"
    return event.error_type or "error"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
