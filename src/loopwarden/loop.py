"""The loop: the model proposes, the guard decides, the executor runs, the state updates, the
verifier decides, and every step is yielded as an event.

    async for event in Agent(model, tools).stream("question"):   # agent.py
        ...

Read in order: events() (the tool phase's loop) → _check(), _proposed(), _execute(), _finished() → _end_phase() or
_steer() (terminal tool, checklist, findings). How a phase ends and the model call live in ending.py, a
step's events in step_events.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from functools import cached_property
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from .config import CHECKLIST_DONE_REQUEST, CHECKLIST_OPEN_REMINDER
from .context import RunContext, current_context
from .ending import (
    Stop,
    after_stop,
    answered,
    apply_findings,
    approval_review,
    call_model,
    check_budgets,
    final_answer,
    finish_with_answer,
    finished,
    phase_event,
    started_event,
)
from .events import (
    Event,
    EventStamper,
    IntentRouted,
    ToolCallFinished,
    ToolsDiscovered,
    Totals,
)
from .executor import Execution, Executor
from .guard import FORGET_CALL_RECORDS, build_detectors
from .guard.detector import hooked
from .guard.ladder import Finding, Rung
from .guard.monologue import PENDING_TERMINAL, open_work
from .guard.novelty import novelty_of
from .guard.repeat import RepeatGuard
from .handoff import HandoffTool, hand_off
from .hooks import run_hook
from .hotpath.trusted import trusted
from .models.base import Message, Model, ModelReply, ToolCall, ToolChoice
from .output import OutputSpec
from .policy.approval import ApprovalReview, messages_of
from .policy.scope import Scope, request_text
from .policy.slots import RunClock
from .proposals import Proposal, ProposalChecker, first_stopped, terminal_result
from .state import CallRecord, Checklist, RunState
from .step_events import finished_values, keep_call, keep_pair, model_event, proposed_event, verdict_event
from .tools import Tool, ToolResult

if TYPE_CHECKING:
    from .agent import Agent


class Run:
    """One run of an agent: the loop and the state it keeps."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        prompt: str | list[Message],
        run_id: str,
        stamper: EventStamper | None = None,
        *,
        deps: Any = None,
        on_text: Callable[[str], None] | None = None,
        handed_from: Run | None = None,
        wrap_model: Callable[[Model], Model] | None = None,
    ) -> None:
        self.agent, self.config, self.run_id = agent, agent.config, run_id
        self.stamp = stamper or EventStamper(run_id)
        self.totals = trusted(Totals, {})  # every count at its default: Totals() validates the defaults
        self.counts: dict[str, Any] = self.totals.__dict__
        """The totals' own values, counted in place by the loop (`Totals.count` without a method
        looked up through pydantic's attribute hook and a call per count)."""
        self.deps, self.on_text, self.wrap_model = deps, on_text, wrap_model
        self.handed_from: Run | None = handed_from
        self.handed_to: Run | None = None
        self.output = OutputSpec.of(agent.output_type)
        self.verifiers = [*agent.verifiers, *([self.output.verify] if self.output else [])]
        self.state = RunState(checklist=Checklist(agent.checklist) if agent.checklist else None)
        self.novelty = novelty_of(self.state)
        self.repeats = RepeatGuard(self.config.ladder, self.novelty)
        self.detectors = build_detectors(agent.detectors, self.config.disabled_detectors)
        self._hooked = hooked(self.detectors)
        self._hooks = {hook: [getattr(d, hook) for d in found] for hook, found in self._hooked.items()}
        self._reuse = all(type(d) in FORGET_CALL_RECORDS for d in self._hooked["on_calls"])  # one record a call
        self._terminals = [  # a handoff is an option, not the way to finish
            t.wire_name for t in agent.registry if t.terminal and not isinstance(t, HandoffTool)
        ]
        roles = agent.principal.roles if agent.principal else None
        self.scope = Scope(agent.registry, roles, RunClock(agent.clock), agent.tool_search)
        self.checker = ProposalChecker(agent.registry, self.repeats, roles, self.scope.arguments)
        self.executor = Executor(
            retry=self.config.retry,
            default_timeout=self.config.tool_timeout,
            max_parallel=self.config.max_parallel_tools,
        )
        self.prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)[:2000]
        self.prompt_in = prompt
        self.messages: list[Message] = [{"role": "system", "content": agent.system}] if agent.system else []
        if self.output is not None:
            self.messages.append({"role": "system", "content": self.output.instruction()})
        self.messages += [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        self.offered = list(agent.offered if agent.offered is not None else agent.registry.names())
        self.turn = 0
        self.done = False
        self.turn_findings: list[Finding] = []
        self.nudged: set[str] = set()
        self.fired: list[str] = []  # detectors that stepped in, in the order they first did
        self.narrowed: set[str] = set()
        self.forced_choice: ToolChoice | None = None
        self.last_offered: list[str] = []
        self.last_choice: ToolChoice | None = None
        self.last_call_ms = 0.0
        self.replay: ModelReply | None = None  # a paused turn's calls, run first on resume
        self.started = time.monotonic()
        if (hook := run_hook.get()) is not None:  # e.g. durable/: model calls and tools become steps
            hook(self)

    @cached_property
    def approvals(self) -> ApprovalReview:
        """Made when a call first needs approval (most runs have none to ask: nothing to set up)."""
        return ApprovalReview(self.agent.approvals, self.stamp, messages_of(self))  # no cycle: freed with the run

    # -- the loop ------------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[Event]:
        request = request_text(self.prompt_in, latest=self.replay is None)  # a resumed run re-routes its request
        route = await self.scope.open(self.agent.router, request, self.agent.offered)
        self.offered = self.scope.base
        if self.handed_from is None:  # a handed-over run goes on under the run_started already told
            yield started_event(self, route.intent_name if route else None)
        if route is not None:
            self.scope.charge(self.totals, self.config.budgets)
            yield self.stamp(IntentRouted, **self.scope.route_fields())
            if route.question is not None:  # code could not decide: ask, do not guess
                yield finished(self, "paused", "clarification_needed", route.question)
                return
            self._adopt_intent()
        try:
            reply = self.replay  # a paused turn's calls run first, then the tool phase goes on
            if reply is not None:
                self.last_offered, calls = self._offered_now(), reply.tool_calls
            while not self.done:  # the tool phase, all in this generator: no generator of its own per turn
                if reply is None:
                    check_budgets(self)
                    reply = await call_model(self, self._offered_now(), self._choice_now())
                    r = reply.__dict__  # read once (a pydantic instance's attributes go through its `__getattr__` hook)
                    if (called := model_event(self, reply, r)) is not None:  # None: kept (EventStamper.keep)
                        yield called
                    for event in apply_findings(self) if self._on_text(reply, r) else ():  # text flagged: steer
                        yield event
                    if not (calls := r["tool_calls"]) and self._keep_working(reply):
                        reply = None
                        continue
                    if not calls:
                        if not self.verifiers:  # nothing to verify: no async generator for the ending
                            yield answered(self, reply.text or "", "final_answer")
                            return
                        async for event in finish_with_answer(self, reply, "final_answer"):
                            yield event
                        return
                    self.counts["tool_rounds"] += 1
                    self.messages.append(reply.assistant_message())
                proposals, reply = self._check(calls), None
                if len(proposals) == 1 and self._quick(p := proposals[0]):
                    # The common turn fused (what _proposed, _execute, _finished, _end_phase and
                    # _steer do for it, in their order): no generator, coroutine or list of its own.
                    turn, tool, stamp = self.turn, p.tool, self.stamp
                    assert tool is not None and p.validated is not None
                    if stamp.later and (kept := stamp.kept) is not None and len(kept) < stamp.kept_most:
                        # the call's three events kept as one (keep_call); a traced run's full batch is told
                        at, first, proposed_at = len(kept), stamp.take(), time.time()
                        stamp.take()
                        verdict_at = time.time()
                    else:
                        first, at, proposed_at, verdict_at = 0, 0, 0.0, 0.0
                        if (proposed := proposed_event(self, p)) is not None:  # None: kept (EventStamper.keep)
                            yield proposed
                        if (verdict := verdict_event(self, p)) is not None:
                            yield verdict
                    if self._hooks["on_calls"]:
                        self._observe("on_calls", [p.shown_record(self._reuse)])
                    token = None  # the context is set only for a tool that takes it (nothing else reads it)
                    if tool.context_arg is not None:
                        token = current_context.set(RunContext(self.deps, self.run_id, turn))
                    try:
                        began = time.perf_counter()  # Executor.run_inline, its `Execution` left out
                        done = self.executor.attempt_inline(tool, p.validated, began)
                        if type(done) is CoroutineType:  # to be retried
                            if first:  # what the run kept may be committed while it waits (a traced run's)
                                keep_pair(self, first, at, proposed_at, verdict_at, p)
                                first = 0
                            self._executed(p, await done)
                        else:
                            self._ran(p, done, began)  # type: ignore[arg-type]
                    finally:
                        if token is not None:
                            current_context.reset(token)
                    if first:
                        record = self._finish_kept(p, first, at, proposed_at, verdict_at)
                    else:
                        finished_event, record = self._finish(p)
                        if finished_event is not None:
                            yield finished_event
                    self._settle([record])
                    if self.scope.search is not None and (found := self._discovered([(tool, p.result)])) is not None:
                        yield found
                    state = self.state  # (checklist_complete asked only of a run with a checklist)
                    if (tool.terminal and p.result.ok) or (state.checklist is not None and state.checklist_complete):  # type: ignore[union-attr]
                        async for event in self._end_phase(proposals):
                            yield event
                    else:
                        for event in apply_findings(self) if self.turn_findings else ():
                            yield event
                    # The arguments' model has done its work: a run that keeps its events keeps the
                    # proposal to the end (keep_call), which needs only `arguments` (the model and its
                    # fields-set are two objects less a step for the collector to walk meanwhile).
                    p.validated = None
                    continue
                for event in self._proposed(proposals):
                    yield event
                if ApprovalReview.needed(proposals):
                    async for event in approval_review(self, proposals):
                        yield event
                    if self.done:
                        return
                await self._execute([p for p in proposals if p.runnable])
                for event in self._finished(proposals):
                    yield event
                stopped = first_stopped(proposals)
                if stopped is None and (terminal_result(proposals) is not None or self.state.checklist_complete):
                    async for event in self._end_phase(proposals):  # an async generator only when the phase ends
                        yield event
                else:
                    self._steer(proposals, stopped)
                    for event in apply_findings(self) if self.turn_findings else ():
                        yield event
        except Stop as stop:
            async for event in after_stop(self, stop):
                yield event

    def _quick(self, p: Proposal) -> bool:
        """Whether a turn's one call takes the fused way in `events`: allowed (not refused,
        repeated, shared or cached), no approval to ask, run inline by the plain executor."""
        tool = p.tool
        return (
            tool is not None
            and p.validated is not None
            and p.result is None
            and p.shares is None
            and p.decision.action == "allowed"
            and not tool.requires_approval
            and self.executor.inline(tool)
        )

    def _check(self, calls: list[ToolCall]) -> list[Proposal]:
        """Guard a reply's calls."""
        offered = set(self.last_offered)  # what the model was offered for this reply (_offered_now then)
        self.narrowed, self.forced_choice = set(), None
        alone = len(calls) == 1  # nothing in the turn to share a result with
        proposals = [self.checker.check(call, self.turn, offered, alone) for call in calls]
        self.counts["tool_calls_proposed"] += len(proposals)
        return proposals

    def _proposed(self, proposals: list[Proposal]) -> Iterator[Event]:
        for p in proposals:  # each None when the run keeps it (EventStamper.keep)
            if (proposed := proposed_event(self, p)) is not None:
                yield proposed
            if (verdict := verdict_event(self, p)) is not None:
                yield verdict
        if self._hooks["on_calls"]:  # records are made for someone to see them
            self._observe("on_calls", [p.shown_record(self._reuse) for p in proposals])

    def _finished(self, proposals: list[Proposal]) -> Iterator[Event]:
        for p in proposals:
            p.take_shared_result()
        records = []
        for p in proposals:
            event, record = self._finish(p)
            records.append(record)
            if event is not None:
                yield event
        self._settle(records)
        if (found := self._discovered((p.tool, p.result) for p in proposals)) is not None:
            yield found

    def _finish(self, p: Proposal) -> tuple[Event | None, CallRecord]:
        """A call's result into the history and the state: its `tool_call_finished` (None when the
        run keeps it: `EventStamper.keep`) and record."""
        assert p.result is not None
        content = p.result.to_model_content()
        self.messages.append({"role": "tool", "tool_call_id": p.call.id, "content": content})
        record = p.result_record()
        done = self.state.add(record)
        return self.stamp.keep(ToolCallFinished, finished_values, p, self.turn, done, content), record

    def _finish_kept(self, p: Proposal, first: int, at: int, proposed_at: float, verdict_at: float) -> CallRecord:
        """`_finish` in the common turn of a run that keeps its events: the call's three kept as one (`keep_call`)."""
        assert p.result is not None
        content, record = p.result.to_model_content(), p.result_record()
        self.messages.append({"role": "tool", "tool_call_id": record.call_id, "content": content})
        keep_call(self, first, at, proposed_at, verdict_at, p, self.state.add(record), content)
        return record

    def _settle(self, records: list[CallRecord]) -> None:
        """After a turn's results: the novelty clock, the ladder, then the detectors see them."""
        self.novelty.observe_results(self.turn, records, self.state)
        self.repeats.settle(records)
        self._observe("on_results", records)

    def _discovered(self, results: Iterable[tuple[Tool | None, ToolResult | None]]) -> Event | None:
        if self.scope.search is None or not (found := self.scope.observe(results)):
            return None
        return self.stamp(ToolsDiscovered, turn=self.turn, tools=found, n_tools_offered_next=len(self._offered_now()))

    async def _end_phase(self, proposals: list[Proposal]) -> AsyncIterator[Event]:
        """A terminal tool returned, or the checklist is complete (and no call was stopped)."""
        terminal = terminal_result(proposals)
        if terminal is not None:
            assert terminal.result is not None
            if isinstance(terminal.tool, HandoffTool):
                async for event in hand_off(self, terminal, terminal.tool):
                    yield event
                return
            output = terminal.result.data if terminal.result.data is not None else terminal.arguments
            rescued = isinstance(self.last_choice, dict)  # the runtime forced this call
            if self.output is not None and self.output.accept(output):
                output = self.output.dump()
            yield phase_event(self, "terminal_tool", "completed", f"{terminal.call.name} ended the phase")
            yield finished(self, "completed", "terminal_tool", output, rescued=rescued)
            self.done = True
            return
        yield phase_event(self, "checklist_complete", "completed", "every required checklist item is done")
        async for event in final_answer(self, CHECKLIST_DONE_REQUEST, "checklist_complete", "completed"):
            yield event
        self.done = True

    def _steer(self, proposals: list[Proposal], stopped: Proposal | None) -> None:
        """The turn's findings, to apply: a stopped call first, then the ladder's steps, then the detectors'."""
        if stopped is not None:
            self.turn_findings.insert(0, stopped.finding(self.config.ladder.stop_at))
        for p in proposals:
            if p.decision.action in ("nudged", "narrowed") and p.tool is not None:
                rung = Rung.NUDGE if p.decision.action == "nudged" else Rung.NARROW
                self.turn_findings.append(p.finding(p.decision.count, rung))

    # -- findings: steer once, narrow, stop ----------------------------------------------------

    def _observe(self, hook: str, records: list[Any]) -> None:
        for observe in self._hooks[hook]:
            finding = observe(self.turn, records, self.state)
            if finding is not None:
                self.turn_findings.append(finding)

    def _on_text(self, reply: ModelReply, r: dict[str, Any]) -> bool:
        """Text detectors see every reply; with calls, their findings wait for the turn's results.
        True when a reply without calls was flagged: its findings are to be applied now. `r` is
        the reply's `__dict__`."""
        if self.turn_findings:  # (an empty one stays: no new list a reply)
            self.turn_findings = []
        self.text_flagged = False
        text, calls = r["text"], r["tool_calls"]
        self.state.add_reply(self.turn, text or "", len(calls), bool(self.last_offered))
        offered, data = self.last_offered, self.state.data
        if self._terminals:
            data[PENDING_TERMINAL] = [n for n in self._terminals if n in offered]
        elif PENDING_TERMINAL not in data:  # no terminal tool: nothing is ever pending, one empty list a run
            data[PENDING_TERMINAL] = []
        if text:
            self.novelty.observe_text(text)
        if not text and calls:
            return False  # an empty reply with no call is still a reply that did nothing: detectors see it
        for detector in self._hooked["on_text"]:
            finding = detector.on_text(self.turn, text or "", bool(self.last_offered), self.state)
            if finding is not None:
                self.turn_findings.append(finding)
        if self.turn_findings and not calls:
            self.text_flagged = True  # not accepted as the answer: steer (or stop) and go on
            self.messages.append(reply.assistant_message())
        return self.text_flagged

    def _keep_working(self, reply: ModelReply) -> bool:
        """A text-only reply is no answer while text detectors object to it, or while work is
        open and tools are offered: checklist items left, or a terminal tool not yet called
        (then the model is reminded what is left; the monologue detector counts the replies)."""
        if self.text_flagged:
            return True
        missing = open_work(self.state) if self.last_offered else []
        if not missing:
            return False
        reminder = CHECKLIST_OPEN_REMINDER.format(missing=", ".join(missing))
        self.messages += [reply.assistant_message(), {"role": "user", "content": reminder}]
        return True

    # -- model calls and budgets -----------------------------------------------------------------

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

    async def _execute(self, runnable: list[Proposal]) -> None:
        token = current_context.set(RunContext(self.deps, self.run_id, self.turn))
        try:
            done = self.executor.start([(p.tool, p.validated) for p in runnable])  # type: ignore[misc]
            executions = done if isinstance(done, list) else await done
        finally:
            current_context.reset(token)
        for p, execution in zip(runnable, executions, strict=True):
            self._executed(p, execution)

    def _ran(self, p: Proposal, result: ToolResult, began: float) -> None:
        """`_executed` of a call whose one attempt began at `began` and gave `result` (`Executor.attempt_inline`)."""
        p.result, p.attempts, p.duration_ms = result, 1, (time.perf_counter() - began) * 1000
        self.counts["tool_executions"] += 1
        self.repeats.record(p.fingerprint, p.tool, result, self.turn)  # type: ignore[arg-type]

    def _executed(self, p: Proposal, execution: Execution) -> None:
        p.set_execution(execution)
        self.counts["tool_executions"] += 1
        assert p.tool is not None
        self.repeats.record(p.fingerprint, p.tool, execution.result, self.turn)

    def final(self) -> Run:
        """The run that ended the conversation: this one, or the last it was handed to."""
        return self if self.handed_to is None else self.handed_to.final()

    def totals_so_far(self) -> Totals:
        """This run's totals plus those of the runs that handed the conversation to it."""
        if self.handed_from is None:
            return self.totals
        return self.handed_from.totals_so_far().plus(self.totals)
