"""How a tool phase ends, and the run with it: a stop under its policy, one last answer with
no tools offered, verification of that answer. Also the model call itself (with the budgets
checked before it) and the run's and phase's own events (a step's are in step_events.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, get_args

from .config import ASSEMBLED_MARK, NO_CALLS_REQUEST, WRAP_UP_REQUEST
from .events import (
    Event,
    GuardVerdict,
    ModelFailed,
    NudgeInjected,
    PhaseEnded,
    RunFinished,
    RunStarted,
    Status,
    StopPolicy,
    count_usage,
)
from .guard.budget import HARD_BUDGET_REASONS
from .guard.ladder import Finding, Rung
from .guard.repetition import ChantInStream, StreamWatch, chant
from .hotpath.trusted import in_order
from .models.base import ModelError, ModelReply, ModelRequest, ToolChoice, Usage
from .proposals import Proposal
from .step_events import model_event
from .verify import first_failure, reinforcement

if TYPE_CHECKING:
    from .loop import Run


class Stop(Exception):
    """Ends the tool phase; `event` (a verdict or a model error) is yielded before the ending."""

    def __init__(self, reason: str, message: str, *, hard: bool = False, event: Event | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.hard, self.event = reason, message, hard, event


# -- ending ----------------------------------------------------------------------------------------


async def after_stop(run: Run, stop: Stop) -> AsyncIterator[Event]:
    if stop.event is not None:
        yield stop.event
    policy = run.config.policy
    status: Status = "failed" if policy == "fail" else "paused" if policy == "handoff" else "degraded"
    yield phase_event(run, stop.reason, status, stop.message)
    hard = stop.hard or stop.reason in HARD_BUDGET_REASONS
    if status == "degraded" and run.config.wrap_up and not hard:
        async for event in final_answer(run, WRAP_UP_REQUEST, stop.reason, status):
            yield event
        return
    yield finished(run, status, stop.reason, None)


async def final_answer(run: Run, request: str, stop_reason: str, status: Status) -> AsyncIterator[Event]:
    """One more model call with no tools offered; its text is the run's output. A reply with
    no answer in it (only tool calls, nothing, or a chant) is asked once more with the tools
    shown and `tool_choice="none"`; if that brings none either, the answer is assembled from
    the results gathered and marked as such. The output is never empty."""
    run.messages.append({"role": "user", "content": request})
    reply: ModelReply | None = None
    asks: list[tuple[list[str], ToolChoice | None]] = [([], None), (run.scope.offered(set()), "none")]
    for tools, choice in asks:
        try:
            reply = await call_model(run, tools, choice)
        except Stop as stop:
            if stop.event is not None:
                yield stop.event
            yield finished(run, status, stop_reason, None, note=stop.message)
            return
        if (called := model_event(run, reply)) is not None:
            yield called
        if reply.tool_calls:
            yield run.stamp(
                GuardVerdict,
                turn=run.turn,
                detector="no_tools_phase",
                action="refused",
                reason="tool calls proposed when asked for the answer; ignored",
                evidence=[c.name for c in reply.tool_calls],
            )
        chanted = chant(reply.text or "")
        if chanted is not None:
            yield run.stamp(
                GuardVerdict, turn=run.turn, detector="repetition", action="refused", reason=f"no answer: {chanted}"
            )
        elif (reply.text or "").strip():
            break
        run.messages += [
            {"role": "assistant", "content": reply.text or ""},
            {"role": "user", "content": NO_CALLS_REQUEST},
        ]
    else:
        yield finished(run, status, stop_reason, assembled_answer(run), assembled=True)
        return
    async for event in finish_with_answer(run, reply, stop_reason, status):
        yield event


def assembled_answer(run: Run) -> str:
    """What the tools returned, as an answer nobody wrote: the fallback when the model gives none."""
    seen: set[str] = set()
    lines = []
    for record in run.state.records:
        result = record.result
        if result is None or not record.executed or record.fingerprint in seen:
            continue
        seen.add(record.fingerprint)
        lines.append(f"- {record.tool}: {result.to_model_content()[:300]}")
    body = "\n".join(lines[-20:]) or "- no tool was run"
    return f"{ASSEMBLED_MARK}\n{body}"


async def finish_with_answer(
    run: Run, reply: ModelReply, stop_reason: str, status: Status = "completed"
) -> AsyncIterator[Event]:
    text = reply.text or ""
    for _ in range(run.config.max_verify_retries):
        problem = first_failure(run.verifiers, text)
        if problem is None:
            break
        yield run.stamp(GuardVerdict, turn=run.turn, detector="verifier", action="refused", reason=problem)
        run.messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": reinforcement(problem)},
        ]
        try:
            reply = await call_model(run, [], None)
        except Stop as stop:
            if stop.event is not None:
                yield stop.event
            yield finished(run, "failed", stop.reason, None, note=stop.message)
            return
        if (called := model_event(run, reply)) is not None:
            yield called
        text = reply.text or ""
    else:
        if first_failure(run.verifiers, text) is not None:
            yield finished(run, "failed", "verifier_failed", text)
            return
    yield answered(run, text, stop_reason, status)


def answered(run: Run, text: str, stop_reason: str, status: Status = "completed") -> Event:
    """The accepted answer into the history, and the run's end; what `finish_with_answer` ends
    with, and all it does for a run with no verifier (the loop then calls this alone)."""
    run.messages.append({"role": "assistant", "content": text})
    return finished(run, status, stop_reason, run.output.dump() if run.output is not None else text)


async def approval_review(run: Run, proposals: list[Proposal]) -> AsyncIterator[Event]:
    """A turn's calls that need a person's approval: asked for, or the run ends paused."""
    async for event in run.approvals.review(proposals, run.turn):
        yield event
    run.started += run.approvals.waited  # a person's time is not the run's time budget
    run.approvals.waited = 0.0
    if run.approvals.paused is not None:  # no one to ask in process: hand the run over
        yield phase_event(run, "approval_required", "paused", "a call needs approval")
        yield finished(run, "paused", "approval_required", run.approvals.paused.model_dump(mode="json"))
        run.done = True


# -- the model call and the budgets before it --------------------------------------------------


def check_budgets(run: Run) -> None:
    spent = run.config.budgets.exhausted(run.totals, time.monotonic() - run.started)
    spent = spent or run.scope.cap_reached(run.counts["tool_rounds"])
    if spent is not None:
        raise Stop(*spent)


async def call_model(run: Run, tool_names: list[str], choice: ToolChoice | None) -> ModelReply:
    run.turn += 1
    # Built by the runtime from checked parts: not re-validated (the history grows every turn).
    request = in_order(  # every field, in field order
        ModelRequest,
        {
            "messages": list(run.messages),
            "tools": run.checker.registry.openai_tools(tool_names),  # the agent's (not its property's read)
            "tool_choice": choice if tool_names else None,
            "max_tokens": run.config.max_output_tokens,
            "on_text": StreamWatch(run.on_text) if run.on_text is not None else None,
        },
    )
    remaining = run.config.budgets.remaining_seconds(time.monotonic() - run.started)
    began = time.perf_counter()
    try:
        if remaining is None:  # no time budget: no timer to arm
            reply = await run.agent.model.complete(request)
        else:
            async with asyncio.timeout(remaining):
                reply = await run.agent.model.complete(request)
    except ChantInStream as cut:  # the stream was cut where it began to chant: that text is the reply
        # The usage never arrived; about 4 characters a token keeps the token budget honest.
        reply = ModelReply(text=cut.text, finish_reason="chant", usage=Usage(completion_tokens=len(cut.text) // 4))
    except TimeoutError:
        raise Stop("time_budget", "wall-clock budget ran out during a model call", hard=True) from None
    except ModelError as error:
        _charge(run, error.attempts, error.usage)  # refused and timed-out attempts cost too
        failed = run.stamp(
            ModelFailed,
            turn=run.turn,
            **error.event_fields(),
        )
        raise Stop("model_error", f"{error.kind}: {error.message}", hard=True, event=failed) from None
    run.last_call_ms = (time.perf_counter() - began) * 1000
    run.last_offered, run.last_choice = tool_names, choice if tool_names else None  # the request's tool_choice
    r = reply.__dict__
    _charge(run, r["attempts"], r["usage"])
    return reply


def _charge(run: Run, attempts: int, usage: Usage) -> None:
    """Every request that reached the server is a model call, priced (retries included)."""
    counts = run.counts  # the totals' values, counted in place
    counts["model_calls"] += attempts
    count_usage(counts, usage)
    if run.config.budgets.prices:
        counts["cost"] += run.config.budgets.cost_of(run.agent.model.name, usage)


def apply_findings(run: Run) -> Iterator[Event]:
    """The turn's findings, each told (the ladder's were, per call), then a stop raised, the
    tools narrowed, a nudge given once per detector."""
    findings, run.turn_findings = run.turn_findings, []
    for finding in findings:
        if finding.rung != Rung.NONE and finding.detector not in run.fired:
            run.fired.append(finding.detector)
        if finding.detector != "repeated_call":  # its verdicts were told per call already
            yield finding_event(run, finding)
        if finding.rung == Rung.STOP:
            raise Stop(finding.stop_reason, finding.reason)
        if finding.rung == Rung.NARROW:
            _narrow(run, finding)
        if finding.rung in (Rung.NUDGE, Rung.NARROW) and finding.detector not in run.nudged:
            run.nudged.add(finding.detector)
            text = finding.nudge or run.config.nudge_text
            run.messages.append({"role": "user", "content": text})
            yield run.stamp(NudgeInjected, turn=run.turn, detector=finding.detector, text=text)


def _narrow(run: Run, finding: Finding) -> None:
    terminal = next((t for t in run.agent.registry if t.terminal and t.wire_name in run.offered), None)
    if terminal is not None:
        run.forced_choice = {"type": "function", "function": {"name": terminal.wire_name}}
    elif finding.require_call:
        run.forced_choice = "required"
    else:
        run.narrowed |= set(finding.tools)


def finding_event(run: Run, finding: Finding) -> Event:
    action = {Rung.NUDGE: "nudged", Rung.NARROW: "narrowed", Rung.STOP: "stopped"}.get(finding.rung, "allowed")
    return run.stamp(  # validated: a Finding may come from an application's own detector
        GuardVerdict,
        turn=run.turn,
        detector=finding.detector,
        action=action,
        reason=finding.reason,
        evidence=finding.evidence,
        count=finding.count,
    )


def phase_event(run: Run, reason: str, status: Status, message: str) -> Event:
    if status != "completed" and reason not in run.fired:
        run.fired.append(reason)  # a budget (or any stop no detector announced) is named last
    return run.stamp(
        PhaseEnded,
        phase=run.config.phase,
        stop_reason=reason,
        policy=run.config.policy,
        status=status,
        message=message,
        detectors=list(run.fired),
    )


_POLICIES, _STATUSES = frozenset(get_args(StopPolicy)), frozenset(get_args(Status))


def started_event(run: Run, intent: str | None) -> Event:
    """`run_started`: built in field order when its values are of the types validation checks
    (the model's name and the policy come from the application: else validated, as ever)."""
    model, policy = run.agent.model.name, run.config.policy
    if type(model) is not str or policy not in _POLICIES or not (intent is None or type(intent) is str):
        return run.stamp(RunStarted, input=run.prompt, tools=run.offered, model=model, policy=policy, intent=intent)
    fields = {"input": run.prompt, "tools": list(run.offered), "model": model, "policy": policy, "intent": intent}
    return run.stamp.in_order(RunStarted, fields)


def finished(
    run: Run,
    status: Status,
    reason: str,
    output: Any,
    note: str = "",
    *,
    rescued: bool = False,
    assembled: bool = False,
) -> Event:
    run.totals.duration_s = time.monotonic() - run.started
    run.totals.duplicates_avoided = run.checker.duplicates_avoided
    checklist = run.state.checklist.snapshot() if run.state.checklist else None
    fields = {
        "status": status,
        "stop_reason": reason,
        "output": output,
        "totals": run.totals_so_far(),
        "checklist": checklist,
        "detectors": list(run.fired),
        "rescued": rescued,
        "assembled": assembled,
    }
    # Built in field order when nothing in it comes unchecked from an application (a detector's
    # own stop reason or name, a checklist's item names): else validated, as every event once was.
    if checklist is None and type(reason) is str and status in _STATUSES and all(type(n) is str for n in run.fired):
        return run.stamp.in_order(RunFinished, fields)
    return run.stamp(RunFinished, **fields)
