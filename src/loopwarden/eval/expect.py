"""The expectations of a case, checked against its run. Each failed one gives a reason that
names what was expected and what happened."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..events import Event, ToolCallFinished, ToolCallProposed
from .case import Case

if TYPE_CHECKING:
    from .runner import CaseResult


def _one_of(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def check_expectations(case: Case, result: CaseResult, events: list[Event]) -> list[str]:
    expect, reasons = case.expect, []
    if expect.expected_stop_reason is not None and result.stop_reason not in _one_of(expect.expected_stop_reason):
        reasons.append(f"stop reason {result.stop_reason!r}, expected {expect.expected_stop_reason!r}")
    if expect.expected_status is not None and result.status not in _one_of(expect.expected_status):
        reasons.append(f"status {result.status!r}, expected {expect.expected_status!r}")
    if expect.max_model_calls is not None and result.model_calls > expect.max_model_calls:
        reasons.append(f"{result.model_calls} model calls, at most {expect.max_model_calls} allowed")
    executed = executed_calls(events)
    ran = {tool for tool, _ in executed}
    missing = [t for t in expect.expected_tools if t not in ran]
    if missing:
        reasons.append(f"expected tools never ran: {missing}")
    reasons += _repeat_reasons(expect.forbidden_repeats, executed)
    reasons += _checklist_reasons(case, result)
    if expect.no_guard_trip and result.guard_trips:
        reasons.append(f"the guard stepped in: {result.guard_trips}")
    tripped = {trip.split(":", 1)[0] for trip in result.guard_trips}
    silent = [d for d in expect.expected_detectors if d not in tripped]
    if silent:
        reasons.append(f"expected detectors never stepped in: {silent} (tripped: {sorted(tripped)})")
    output = result.output or ""
    absent = [s for s in expect.output_contains if s not in output]
    if absent:
        reasons.append(f"output lacks {absent}")
    return reasons + _turn_reasons(case, result)


def _turn_reasons(case: Case, result: CaseResult) -> list[str]:
    """The turn-level expectations, and what a case's kind implies."""
    expect, reasons = case.expect, []
    first, stop = result.first_intervention_turn, result.stop_turn
    if expect.first_intervention_by is not None and (first is None or first > expect.first_intervention_by):
        when = "never" if first is None else f"first in turn {first}"
        reasons.append(f"the guard stepped in {when}, expected by turn {expect.first_intervention_by}")
    if expect.stop_by is not None and (stop is None or stop > expect.stop_by):
        when = "was never stopped" if stop is None else f"stopped in turn {stop}"
        reasons.append(f"the phase {when}, expected a stop by turn {expect.stop_by}")
    if (expect.no_intervention or case.kind == "healthy") and result.interventions:
        reasons.append(f"the guard stepped in on a healthy run: {result.interventions}")
    if case.kind == "loop" and not result.interventions:
        reasons.append("a loop case that was neither stopped nor steered")
    stepped_in = {i.split(":", 1)[0] for i in [*result.interventions, *result.guard_trips]}
    if expect.detectors_any and not stepped_in & set(expect.detectors_any):
        reasons.append(f"none of {expect.detectors_any} stepped in (stepped in: {sorted(stepped_in)})")
    if expect.max_phase_model_calls is not None and result.phase_model_calls > expect.max_phase_model_calls:
        reasons.append(
            f"{result.phase_model_calls} model calls in the tool phase, at most {expect.max_phase_model_calls} allowed"
        )
    if expect.max_wrap_up_calls is not None and result.wrap_up_calls > expect.max_wrap_up_calls:
        reasons.append(f"{result.wrap_up_calls} wrap-up model calls, at most {expect.max_wrap_up_calls} allowed")
    if expect.expected_rescued is not None and result.rescued != expect.expected_rescued:
        reasons.append(f"rescued={result.rescued}, expected {expect.expected_rescued}")
    return reasons


def executed_calls(events: list[Event]) -> list[tuple[str, str]]:
    """(tool, args hash) of every call that actually ran, in order."""
    proposed = {e.call_id: (e.tool, e.args_hash) for e in events if isinstance(e, ToolCallProposed)}
    return [
        proposed[e.call_id] for e in events if isinstance(e, ToolCallFinished) and e.executed and e.call_id in proposed
    ]


def _repeat_reasons(forbidden: list[str] | bool, executed: list[tuple[str, str]]) -> list[str]:
    if forbidden is False or forbidden == []:
        return []
    counts = Counter(executed)
    repeated = sorted(
        f"{tool} x{n}" for (tool, _), n in counts.items() if n > 1 and (forbidden is True or tool in forbidden)
    )
    return [f"identical calls executed more than once: {repeated}"] if repeated else []


def _checklist_reasons(case: Case, result: CaseResult) -> list[str]:
    wanted = case.expect.must_complete
    if wanted is False or wanted == []:
        return []
    state = result.checklist or {}
    if wanted is True:
        wanted = [c.name for c in case.checklist if c.required]
    undone = [name for name in wanted if not state.get(name, False)]
    return [f"checklist items not done: {undone}"] if undone else []
