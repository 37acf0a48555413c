"""How a tool phase ends, and the run with it: a stop under its policy, one last answer with
no tools offered, verification of that answer. Also the model call itself (with the budgets
checked before it) and the events a run emits, shared by loop.py and this module."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, get_args

from .config import ASSEMBLED_MARK, NO_CALLS_REQUEST, WRAP_UP_REQUEST
from .events import (
    Event,
    GuardVerdict,
    Head,
    ModelCalled,
    ModelFailed,
    NudgeInjected,
    PhaseEnded,
    RunFinished,
    RunStarted,
    Status,
    StopPolicy,
    ToolCallFinished,
    ToolCallProposed,
    count_usage,
)
from .guard.budget import HARD_BUDGET_REASONS
from .guard.ladder import Finding, Rung
from .guard.repetition import ChantInStream, StreamWatch, chant
from .hotpath.trusted import in_order
from .models.base import ClientNote, ModelError, ModelReply, ModelRequest, ToolChoice, Usage
from .proposals import Proposal
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


# -- events --------------------------------------------------------------------------------------


def model_event(run: Run, reply: ModelReply, r: dict[str, Any] | None = None) -> Event | None:
    """The call's `model_called`; None when the run keeps it (`EventStamper.keep`). `r`: the
    reply's `__dict__`, when the caller has read it."""
    if r is None:  # read once (each attribute of a pydantic instance goes through its `__getattr__` hook)
        r = reply.__dict__
    # the reply's values as they are now (a model may hand back one reply object again, changed)
    stamp = run.stamp
    if stamp.later and (kept := stamp.kept) is not None:
        # EventStamper.keep written out (no argument tuple to unpack into another), empty notes
        # kept as None (one object less a step for the collector to walk while the run goes)
        kept.append((ModelCalled, model_called_values, _CALLED, stamp.run_id, stamp.take(), time.time(), run.turn,
                     r["model"] or run.agent.model.name, run.last_offered, run.last_choice, r["usage"], r["text"],
                     len(r["tool_calls"]), run.last_call_ms, r["notes"] or None, r["attempts"]))  # fmt: skip
        return None
    return stamp.keep(
        ModelCalled,
        model_called_values,
        run.turn,
        r["model"] or run.agent.model.name,
        run.last_offered,
        run.last_choice,
        r["usage"],
        r["text"],
        len(r["tool_calls"]),
        run.last_call_ms,
        r["notes"],
        r["attempts"],
    )


def model_called_values(
    head: Head,
    turn: int,
    model: str | None,
    offered: list[str],
    choice: ToolChoice | None,
    usage: Usage,
    text: str | None,
    n_tool_calls: int,
    duration_ms: float,
    notes: list[ClientNote] | None,
    attempts: int,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Every `model_called` field in field order, and the names given as defaults (`notes` None: none;
    `offered` copied: the run's offer is one list while it stands, `Scope.offered`)."""
    kind, run_id, seq, ts = head
    values = {
        "type": kind,
        "run_id": run_id,
        "seq": seq,
        "ts": ts,
        "turn": turn,
        "model": model,
        "tools_offered": list(offered),
        "n_tools_offered": len(offered),
        "tool_choice": choice,
        "usage": usage,
        "text": text,
        "n_tool_calls": n_tool_calls,
        "duration_ms": duration_ms,
        "notes": [] if notes is None else notes,
        "attempts": attempts,
    }
    return values, _TYPE


def proposed_event(run: Run, p: Proposal) -> Event | None:
    """The call's `tool_call_proposed`; None when the run keeps it (`EventStamper.keep`)."""
    return run.stamp.keep(ToolCallProposed, proposed_values, p, run.turn)


def proposed_values(head: Head, p: Proposal, turn: int) -> tuple[dict[str, Any], tuple[str, ...]]:
    return p.proposed_fields(turn, head), _TYPE


def verdict_event(run: Run, p: Proposal) -> Event | None:
    """The call's `guard_verdict`; None when the run keeps it (`EventStamper.keep`)."""
    return run.stamp.keep(GuardVerdict, verdict_values, p, run.turn)


def verdict_values(head: Head, p: Proposal, turn: int) -> tuple[dict[str, Any], tuple[str, ...]]:
    fields = p.verdict_fields(turn, head)
    # evidence is given only when there is some (else the default)
    return fields, _TYPE if fields["evidence"] else _TYPE_EVIDENCE


def finished_values(
    head: Head, p: Proposal, turn: int, checklist_done: list[str], content: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Every `tool_call_finished` field in field order (`Run._finish`), and the names given as defaults."""
    return p.result_fields(turn, head, checklist_done, content), _TYPE


_TYPE, _TYPE_EVIDENCE = ("type",), ("type", "evidence")


def keep_call(
    run: Run, first: int, at: int, proposed_at: float, verdict_at: float, p: Proposal, done: list[str], content: str
) -> None:
    """A run that keeps its step events (`EventStamper.later`): the common turn's call told as
    one kept item, its `tool_call_proposed` and `guard_verdict` numbered `first` and the next
    (`EventStamper.take`) and timed `proposed_at` and `verdict_at` when `kept` held `at` items,
    its `tool_call_finished` numbered and timed now: one tuple a call, not one an event (each
    an object a young collection walks for as long as the run goes), and `done` kept as None
    when empty (a list too). `call_events` makes the three when they are read. Were anything
    told between them (nothing in the loop does), each is kept as `EventStamper.keep` keeps it."""
    stamp = run.stamp
    kept = stamp.kept
    assert kept is not None
    seq, finished_at = stamp.take(), time.time()
    if seq == first + 2 and len(kept) == at:
        kept.append((call_events, 3, stamp.run_id, first, proposed_at, verdict_at, finished_at, p, run.turn,
                     done or None, content))  # fmt: skip
        return
    run_id, turn = stamp.run_id, run.turn
    kept[at:at] = [
        (ToolCallProposed, proposed_values, _PROPOSED, run_id, first, proposed_at, p, turn),
        (GuardVerdict, verdict_values, _VERDICT, run_id, first + 1, verdict_at, p, turn),
    ]
    kept.append((ToolCallFinished, finished_values, _FINISHED, run_id, seq, finished_at, p, turn, done, content))


def call_events(
    run_id: str,
    first: int,
    proposed_at: float,
    verdict_at: float,
    finished_at: float,
    p: Proposal,
    turn: int,
    done: list[str] | None,
    content: str,
) -> list[Event]:
    """The three events `keep_call` kept, as `EventStamper.keep` would have made each."""
    done_now = [] if done is None else done
    finished = finished_values((_FINISHED, run_id, first + 2, finished_at), p, turn, done_now, content)
    return [
        in_order(ToolCallProposed, *proposed_values((_PROPOSED, run_id, first, proposed_at), p, turn)),
        in_order(GuardVerdict, *verdict_values((_VERDICT, run_id, first + 1, verdict_at), p, turn)),
        in_order(ToolCallFinished, *finished),
    ]


_CALLED, _PROPOSED, _VERDICT, _FINISHED = (
    c.model_fields["type"].default for c in (ModelCalled, ToolCallProposed, GuardVerdict, ToolCallFinished)
)


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
