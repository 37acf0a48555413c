"""The loop: the model proposes, the guard decides, the executor runs, the state updates, the
verifier decides, and every step is yielded as an event.

    async for event in Agent(model, tools).stream("question"):
        ...
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from .approval import ApprovalGate, ApprovalReview, Decision, PendingApproval
from .config import CHECKLIST_DONE_REQUEST, CHECKLIST_OPEN_REMINDER, WRAP_UP_REQUEST, LoopConfig
from .events import (
    Event,
    EventStamper,
    GuardVerdict,
    IntentRouted,
    ModelCalled,
    ModelFailed,
    NudgeInjected,
    PhaseEnded,
    RunFinished,
    RunStarted,
    Status,
    ToolCallProposed,
    ToolResultEvent,
    ToolsDiscovered,
    Totals,
)
from .executor import Executor
from .guard import DetectorFactory, build_detectors
from .guard.budget import HARD_BUDGET_REASONS
from .guard.fingerprint import args_hash
from .guard.ladder import Finding, Rung
from .guard.repeat import RepeatGuard
from .models.base import Message, Model, ModelError, ModelReply, ModelRequest, ToolChoice
from .permissions import Principal
from .proposals import Proposal, ProposalChecker
from .router import Router
from .scope import Scope, request_text
from .slots import RunClock
from .state import Checklist, ChecklistItem, RunState
from .tools import ToolLike, ToolRegistry
from .toolsearch import ToolSearch
from .verify import Verifier, first_failure, reinforcement


@dataclass
class RunResult:
    run_id: str
    status: Status
    stop_reason: str
    output: Any
    totals: Totals
    events: list[Event]
    messages: list[Message]
    state: RunState


class _Stop(Exception):
    """Ends the tool phase; `event` (a verdict or a model error) is yielded before the ending."""

    def __init__(self, reason: str, message: str, *, hard: bool = False, event: Event | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.hard, self.event = reason, message, hard, event


@dataclass
class Agent:
    model: Model
    tools: ToolRegistry | Iterable[ToolLike] = ()
    system: str | None = None
    config: LoopConfig = field(default_factory=LoopConfig)
    checklist: Sequence[ChecklistItem] = ()
    verifiers: Sequence[Verifier] = ()
    detectors: Sequence[DetectorFactory] | None = None
    """Loop detectors, one fresh set per run; the default set when None (see guard.default_detectors),
    none when empty. `config.disabled_detectors` switches any of them off by name."""
    approvals: ApprovalGate | None = None
    """Decides `requires_approval` calls in process; without one such a call pauses the run (resume())."""
    principal_roles: frozenset[str] | None = None
    offered: Sequence[str] | None = None
    """Names of the tools offered each turn; all registered tools when None."""
    router: Router | None = None
    """Routes each request to an intent: its tools, slots, checklist and step cap (router.py)."""
    tool_search: ToolSearch | None = None
    """Progressive disclosure: offer `search_tools` and what it finds, not the registry."""
    principal: Principal | None = None
    """Who runs act for; its roles replace `principal_roles` when set."""
    clock: Callable[[], datetime] | None = None
    """Read once at run start; relative dates in the run resolve from it (default: now, UTC)."""

    def __post_init__(self) -> None:
        if not isinstance(self.tools, ToolRegistry):
            self.tools = ToolRegistry(self.tools)
        if self.tool_search is not None and self.tool_search.name not in self.tools:
            self.tools.add(self.tool_search.build_tool(self.tools))

    @property
    def registry(self) -> ToolRegistry:
        assert isinstance(self.tools, ToolRegistry)
        return self.tools

    def stream(
        self, prompt: str | list[Message], *, run_id: str | None = None, stamper: EventStamper | None = None
    ) -> AsyncIterator[Event]:
        """Run and yield events. Pass a `stamper` to number this run's events within a larger
        sequence (a pipeline running several phases under one run id)."""
        run_id = stamper.run_id if stamper else run_id or uuid.uuid4().hex
        return _Run(self, prompt, run_id, stamper).events()

    async def run(self, prompt: str | list[Message], *, run_id: str | None = None) -> RunResult:
        run = _Run(self, prompt, run_id or uuid.uuid4().hex)
        events = [event async for event in run.events()]
        last = events[-1]
        assert isinstance(last, RunFinished)
        return RunResult(
            run.run_id,
            last.status,
            last.stop_reason,
            last.output,
            last.totals,
            events,
            run.messages,
            run.state,
        )

    def run_sync(self, prompt: str | list[Message], *, run_id: str | None = None) -> RunResult:
        return asyncio.run(self.run(prompt, run_id=run_id))

    def resume(
        self,
        pending: PendingApproval,
        decisions: Mapping[str, bool | Decision],
        *,
        stamper: EventStamper | None = None,
    ) -> AsyncIterator[Event]:
        """Continue a run that paused for approval (approval.py), with a decision per call id."""
        agent = replace(self, approvals=ApprovalGate.with_decisions(decisions, self.approvals))
        run = _Run(agent, pending.messages, stamper.run_id if stamper else pending.run_id, stamper)
        run.messages, run.turn, run.replay = list(pending.messages), pending.turn, pending.replay()
        return run.events()


class _Run:
    def __init__(
        self, agent: Agent, prompt: str | list[Message], run_id: str, stamper: EventStamper | None = None
    ) -> None:
        self.agent, self.config, self.run_id = agent, agent.config, run_id
        self.stamp = stamper or EventStamper(run_id)
        self.totals = Totals()
        self.state = RunState(checklist=Checklist(agent.checklist) if agent.checklist else None)
        self.repeats = RepeatGuard(self.config.ladder)
        self.detectors = build_detectors(agent.detectors, self.config.disabled_detectors)
        self.approvals = ApprovalReview(agent.approvals, self.stamp, lambda: self.messages)
        roles = agent.principal.roles if agent.principal else agent.principal_roles
        self.scope = Scope(agent.registry, roles, RunClock(agent.clock), agent.tool_search)
        self.checker = ProposalChecker(agent.registry, self.repeats, roles, self.scope.arguments.prepare)
        self.executor = Executor(
            retry=self.config.retry,
            default_timeout=self.config.tool_timeout,
            max_parallel=self.config.max_parallel_tools,
        )
        self.prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)[:2000]
        self.prompt_in = prompt
        self.messages: list[Message] = [{"role": "system", "content": agent.system}] if agent.system else []
        self.messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        self.offered = list(agent.offered if agent.offered is not None else agent.registry.names())
        self.turn = 0
        self.done = False
        self.turn_findings: list[Finding] = []
        self.nudged: set[str] = set()
        self.narrowed: set[str] = set()
        self.forced_choice: ToolChoice | None = None
        self.replay: ModelReply | None = None  # a paused turn's calls, run first on resume
        self.started = time.monotonic()

    # -- the loop ------------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[Event]:
        request = request_text(self.prompt_in, latest=self.replay is None)  # a resumed run re-routes its request
        route = await self.scope.open(self.agent.router, request, self.agent.offered)
        self.offered = self.scope.base
        yield self.stamp(
            RunStarted,
            input=self.prompt,
            tools=self.offered,
            model=self.agent.model.name,
            policy=self.config.policy,
            intent=route.intent_name if route else None,
        )
        if route is not None:
            self.scope.charge(self.totals, self.config.budgets)
            yield self.stamp(IntentRouted, **self.scope.route_fields())
            if route.question is not None:  # code could not decide: ask, do not guess
                yield self._finished("paused", "clarification_needed", route.question)
                return
            self._adopt_intent()
        try:
            if self.replay is not None:
                self.last_offered = self._offered_now()
                async for event in self._run_calls(self.replay):
                    yield event
            if not self.done:
                async for event in self._tool_phase():
                    yield event
        except _Stop as stop:
            async for event in self._after_stop(stop):
                yield event

    async def _tool_phase(self) -> AsyncIterator[Event]:
        while True:
            self._check_budgets()
            reply = await self._call_model(self._offered_now(), self._choice_now())
            yield self._model_event(reply)
            async for event in self._on_text(reply):
                yield event
            if not reply.tool_calls and self._keep_working(reply):
                continue
            if not reply.tool_calls:
                async for event in self._finish_with_answer(reply, "final_answer"):
                    yield event
                return
            self.totals.tool_rounds += 1
            self.messages.append(reply.assistant_message())
            async for event in self._run_calls(reply):
                yield event
            if self.done:
                return

    async def _run_calls(self, reply: ModelReply) -> AsyncIterator[Event]:
        offered = set(self._offered_now())
        self.narrowed, self.forced_choice = set(), None
        proposals = [self.checker.check(call, self.turn, offered) for call in reply.tool_calls]
        for p in proposals:
            self.totals.tool_calls_proposed += 1
            yield self.stamp(
                ToolCallProposed,
                turn=self.turn,
                call_id=p.call.id,
                tool=p.call.name,
                arguments=p.arguments,
                args_hash=args_hash(p.arguments),
            )
            yield self._verdict_event(p)
        self._observe("on_calls", [p.record for p in proposals])
        async for event in self.approvals.review(proposals, self.turn):
            yield event
        self.started += self.approvals.waited  # a person's time is not the run's time budget
        self.approvals.waited = 0.0
        if self.approvals.paused is not None:  # no one to ask in process: hand the run over
            yield self._phase_event("approval_required", "paused", "a call needs approval")
            yield self._finished("paused", "approval_required", self.approvals.paused.model_dump(mode="json"))
            self.done = True
            return
        await self._execute([p for p in proposals if p.runnable])
        for p in proposals:
            assert p.result is not None
            self.messages.append({"role": "tool", "tool_call_id": p.call.id, "content": p.result.to_model_content()})
            done = self.state.add(p.record)
            yield self.stamp(ToolResultEvent, turn=self.turn, checklist_done=done, **p.result_fields())
        self._observe("on_results", [p.record for p in proposals])
        if found := self.scope.observe((p.tool, p.result) for p in proposals):
            yield self.stamp(
                ToolsDiscovered, turn=self.turn, tools=found, n_tools_offered_next=len(self._offered_now())
            )
        async for event in self._after_calls(proposals):
            yield event

    async def _after_calls(self, proposals: list[Proposal]) -> AsyncIterator[Event]:
        terminal = next((p for p in proposals if p.tool and p.tool.terminal and p.result and p.result.ok), None)
        stopped = next((p for p in proposals if p.decision.action == "stopped"), None)
        if stopped is not None:
            self.turn_findings.insert(0, stopped.finding(self.config.ladder.stop_at))
        elif terminal is not None:
            assert terminal.result is not None
            output = terminal.result.data if terminal.result.data is not None else terminal.arguments
            yield self._phase_event("terminal_tool", "completed", f"{terminal.call.name} ended the phase")
            yield self._finished("completed", "terminal_tool", output)
            self.done = True
            return
        elif self.state.checklist is not None and self.state.checklist.complete:
            yield self._phase_event("checklist_complete", "completed", "every required checklist item is done")
            async for event in self._final_answer(CHECKLIST_DONE_REQUEST, "checklist_complete", "completed"):
                yield event
            self.done = True
            return
        for p in proposals:
            if p.decision.action in ("nudge", "narrowed") and p.tool is not None:
                rung = Rung.NUDGE if p.decision.action == "nudge" else Rung.NARROW
                self.turn_findings.append(p.finding(p.decision.count, rung))
        for event in self._apply_findings():
            yield event

    # -- findings: steer once, narrow, stop ----------------------------------------------------

    def _observe(self, hook: str, records: list[Any]) -> None:
        for detector in self.detectors:
            finding = getattr(detector, hook)(self.turn, records, self.state)
            if finding is not None:
                self.turn_findings.append(finding)

    def _apply_findings(self) -> Iterator[Event]:
        findings, self.turn_findings = self.turn_findings, []
        for finding in findings:
            if finding.detector != "repeated_call":  # its verdicts were told per call already
                yield self._finding_event(finding)
            if finding.rung == Rung.STOP:
                raise _Stop(finding.stop_reason, finding.reason)
            if finding.rung == Rung.NARROW:
                self._narrow(finding)
            if finding.rung in (Rung.NUDGE, Rung.NARROW) and finding.detector not in self.nudged:
                self.nudged.add(finding.detector)
                text = finding.nudge or self.config.nudge_text
                self.messages.append({"role": "user", "content": text})
                yield self.stamp(NudgeInjected, turn=self.turn, detector=finding.detector, text=text)

    def _narrow(self, finding: Finding) -> None:
        terminal = next((t for t in self.agent.registry if t.terminal and t.wire_name in self.offered), None)
        if terminal is not None:
            self.forced_choice = {"type": "function", "function": {"name": terminal.wire_name}}
        elif finding.require_call:
            self.forced_choice = "required"
        else:
            self.narrowed |= set(finding.tools)

    async def _on_text(self, reply: ModelReply) -> AsyncIterator[Event]:
        """Text detectors see every reply; with calls, their findings wait for the turn's results."""
        self.turn_findings, self.text_flagged = [], False
        self.state.add_reply(self.turn, reply.text or "", len(reply.tool_calls), bool(self.last_offered))
        if not reply.text and reply.tool_calls:
            return  # an empty reply with no call is still a reply that did nothing: detectors see it
        for detector in self.detectors:
            finding = detector.on_text(self.turn, reply.text or "", bool(self.last_offered), self.state)
            if finding is not None:
                self.turn_findings.append(finding)
        if self.turn_findings and not reply.tool_calls:
            self.text_flagged = True  # not accepted as the answer: steer (or stop) and go on
            self.messages.append(reply.assistant_message())
            for event in self._apply_findings():
                yield event

    def _keep_working(self, reply: ModelReply) -> bool:
        """A text-only reply is no answer while text detectors object to it, or while declared
        work is open and tools are offered (then the model is reminded what is left)."""
        if self.text_flagged:
            return True
        if not (self.state.task_open and self.last_offered and self.state.checklist):
            return False
        reminder = CHECKLIST_OPEN_REMINDER.format(missing=", ".join(self.state.checklist.missing))
        self.messages += [reply.assistant_message(), {"role": "user", "content": reminder}]
        return True

    # -- ending ----------------------------------------------------------------------------------

    async def _after_stop(self, stop: _Stop) -> AsyncIterator[Event]:
        if stop.event is not None:
            yield stop.event
        policy = self.config.policy
        status: Status = "failed" if policy == "fail" else "paused" if policy == "handoff" else "degraded"
        yield self._phase_event(stop.reason, status, stop.message)
        hard = stop.hard or stop.reason in HARD_BUDGET_REASONS
        if status == "degraded" and self.config.wrap_up and not hard:
            async for event in self._final_answer(WRAP_UP_REQUEST, stop.reason, status):
                yield event
            return
        yield self._finished(status, stop.reason, None)

    async def _final_answer(self, request: str, stop_reason: str, status: Status) -> AsyncIterator[Event]:
        """One more model call with no tools offered; its text is the run's output."""
        self.messages.append({"role": "user", "content": request})
        try:
            reply = await self._call_model([], None)
        except _Stop as stop:
            if stop.event is not None:
                yield stop.event
            yield self._finished(status, stop_reason, None, note=stop.message)
            return
        yield self._model_event(reply)
        if reply.tool_calls:
            yield self.stamp(
                GuardVerdict,
                turn=self.turn,
                detector="no_tools_phase",
                action="refused",
                reason="tool calls proposed when no tools were offered; ignored",
                evidence=[c.name for c in reply.tool_calls],
            )
        async for event in self._finish_with_answer(reply, stop_reason, status):
            yield event

    async def _finish_with_answer(
        self, reply: ModelReply, stop_reason: str, status: Status = "completed"
    ) -> AsyncIterator[Event]:
        text = reply.text or ""
        for _ in range(self.config.max_verify_retries):
            problem = first_failure(list(self.agent.verifiers), text)
            if problem is None:
                break
            yield self.stamp(GuardVerdict, turn=self.turn, detector="verifier", action="refused", reason=problem)
            self.messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": reinforcement(problem)},
            ]
            try:
                reply = await self._call_model([], None)
            except _Stop as stop:
                if stop.event is not None:
                    yield stop.event
                yield self._finished("failed", stop.reason, None, note=stop.message)
                return
            yield self._model_event(reply)
            text = reply.text or ""
        else:
            if first_failure(list(self.agent.verifiers), text) is not None:
                yield self._finished("failed", "verifier_failed", text)
                return
        self.messages.append({"role": "assistant", "content": text})
        yield self._finished(status, stop_reason, text)

    # -- model calls and budgets -----------------------------------------------------------------

    def _check_budgets(self) -> None:
        spent = self.config.budgets.exhausted(self.totals, time.monotonic() - self.started)
        spent = spent or self.scope.cap_reached(self.totals.tool_rounds)
        if spent is not None:
            raise _Stop(*spent)

    async def _call_model(self, tool_names: list[str], choice: ToolChoice | None) -> ModelReply:
        self.turn += 1
        request = ModelRequest(
            messages=list(self.messages),
            tools=self.agent.registry.openai_tools(tool_names),
            tool_choice=choice if tool_names else None,
        )
        remaining = self.config.budgets.remaining_seconds(time.monotonic() - self.started)
        began = time.perf_counter()
        try:
            async with asyncio.timeout(remaining):
                reply = await self.agent.model.complete(request)
        except TimeoutError:
            raise _Stop("time_budget", "wall-clock budget ran out during a model call", hard=True) from None
        except ModelError as error:
            failed = self.stamp(
                ModelFailed,
                turn=self.turn,
                kind=error.kind,
                message=error.message,
                retryable=error.retryable,
                status=error.status,
                notes=error.notes,
            )
            raise _Stop("model_error", f"{error.kind}: {error.message}", hard=True, event=failed) from None
        self.last_call_ms = (time.perf_counter() - began) * 1000
        self.last_offered, self.last_choice = tool_names, request.tool_choice
        self.totals.model_calls += 1
        self.totals.add_usage(reply.usage)
        self.totals.cost += self.config.budgets.cost_of(self.agent.model.name, reply.usage)
        return reply

    def _offered_now(self) -> list[str]:
        return self.scope.offered(self.narrowed)

    def _adopt_intent(self) -> None:
        """The routed intent's checklist (unless the agent has its own) and instructions."""
        if self.state.checklist is None and self.scope.checklist():
            self.state.checklist = Checklist(self.scope.checklist())
        instructions = self.scope.instructions()
        if instructions is not None and {"role": "system", "content": instructions} not in self.messages:
            self.messages.insert(1 if self.agent.system else 0, {"role": "system", "content": instructions})

    def _choice_now(self) -> ToolChoice | None:
        return self.forced_choice or "auto"

    # -- events ----------------------------------------------------------------------------------

    def _model_event(self, reply: ModelReply) -> Event:
        return self.stamp(
            ModelCalled,
            turn=self.turn,
            model=reply.model or self.agent.model.name,
            tools_offered=self.last_offered,
            n_tools_offered=len(self.last_offered),
            tool_choice=self.last_choice,
            usage=reply.usage,
            text=reply.text,
            n_tool_calls=len(reply.tool_calls),
            duration_ms=self.last_call_ms,
            notes=reply.notes,
        )

    def _verdict_event(self, p: Proposal) -> Event:
        return self.stamp(GuardVerdict, turn=self.turn, call_id=p.call.id, tool=p.call.name, **p.verdict_fields())

    def _finding_event(self, finding: Finding) -> Event:
        action = {Rung.NUDGE: "nudge", Rung.NARROW: "narrowed", Rung.STOP: "stopped"}.get(finding.rung, "allow")
        return self.stamp(
            GuardVerdict,
            turn=self.turn,
            detector=finding.detector,
            action=action,
            reason=finding.reason,
            evidence=finding.evidence,
            count=finding.count,
        )

    def _phase_event(self, reason: str, status: Status, message: str) -> Event:
        return self.stamp(
            PhaseEnded,
            phase=self.config.phase,
            stop_reason=reason,
            policy=self.config.policy,
            status=status,
            message=message,
        )

    def _finished(self, status: Status, reason: str, output: Any, note: str = "") -> Event:
        self.totals.duration_s = time.monotonic() - self.started
        self.totals.duplicates_avoided = self.checker.duplicates_avoided
        checklist = self.state.checklist.snapshot() if self.state.checklist else None
        return self.stamp(
            RunFinished, status=status, stop_reason=reason, output=output, totals=self.totals, checklist=checklist
        )

    async def _execute(self, runnable: list[Proposal]) -> None:
        executions = await self.executor.run_many([(p.tool, p.validated) for p in runnable])  # type: ignore[misc]
        for p, execution in zip(runnable, executions, strict=True):
            p.set_execution(execution)
            self.totals.tool_executions += 1
            assert p.tool is not None
            self.repeats.record(p.fingerprint, p.tool, execution.result, self.turn)
