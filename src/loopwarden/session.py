"""A guard session: loopwarden's own run, driven one step at a time from outside, for an agent
whose loop lives in another framework (adapters/) or behind a wire (proxy/).

    session = GuardSession([ToolSpec("read_file", schema)], LoopConfig())
    turn = await session.next_turn("Summarise a.txt")       # what the next model call must be
    verdicts = await session.propose(reply)                  # the guard's verdict on each call
    await session.record(call_id, result)                    # what a call that ran returned
    content = await session.answer(call_id)                  # a call the guard answered itself

A real `Run` goes on in the background: its model is the framework's model call (the session
hands the run's request out and takes the framework's reply in) and its tools answer with what
the framework's own tools returned. Every verdict, nudge, narrowing, stop, budget and event is
therefore the runtime's own, at the same model call as in an `Agent` run, and the events go to
the agent's trace like any run's (so `loopwarden trace` and `loopwarden eval` read them).

Driven from async code (the coroutines), the run lives on the caller's event loop; driven from
sync code (the `*_sync` methods), on one event loop in a background thread shared by all sessions.
One session is driven one way or the other, not both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .agent import Agent
from .config import LoopConfig
from .events import Event, GuardVerdict, NudgeInjected, PhaseEnded, RunFinished
from .guard.repeat import repeat_notice
from .loop import Run
from .models.base import Message, ModelReply, ModelRequest, ToolChoice
from .proposals import Proposal
from .tools import SideEffect, Tool, ToolResult, business_failure
from .tools.schema import tool_from_schema
from .trace.tracing import TraceTarget

T = TypeVar("T")

NOT_RUN = "not_run"
"""The error type of a call the framework never ran (it went on to the next model call)."""


@dataclass(frozen=True)
class ToolSpec:
    """A framework's tool as the guard sees it: its name, JSON Schema and how calls to it count."""

    name: str
    parameters: dict[str, Any] | None = None
    description: str = ""
    terminal: bool = False
    """Finishes the task: narrowing forces the model to call it."""
    repeatable: bool = False
    """A polling tool: identical calls are legitimate and never counted."""
    side_effect: SideEffect = "read"


@dataclass
class Turn:
    """What the run asks of the next model call."""

    number: int
    request: ModelRequest
    injected: list[str]
    """User messages the runtime added since the last reply (a nudge, a reminder, the wrap-up
    request): the framework's history must get them before the call."""

    @property
    def tools(self) -> list[str]:
        """Names of the tools the call may offer (narrowed ones left out); empty: none at all."""
        return [t["function"]["name"] for t in self.request.tools]

    @property
    def tool_choice(self) -> ToolChoice | None:
        return self.request.tool_choice

    @property
    def forced_tool(self) -> str | None:
        choice = self.request.tool_choice
        return choice["function"]["name"] if isinstance(choice, dict) else None


@dataclass
class CallVerdict:
    call_id: str
    tool: str
    action: str
    """allowed, cached, nudged, narrowed, refused or stopped (the GuardVerdict's action)."""
    reason: str
    runs: bool
    """Whether the framework should run the call (then `record` its result); otherwise the
    session answers it (`answer`)."""


@dataclass
class _Pending:
    turn: Turn
    reply: asyncio.Future[ModelReply]


@dataclass
class _State:
    proposals: dict[str, Proposal] = field(default_factory=dict)
    verdicts: dict[str, CallVerdict] = field(default_factory=dict)
    results: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    claimed: set[str] = field(default_factory=set)


class _Portal:
    """One event loop in a daemon thread where every session's run lives."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="loopwarden-sessions", daemon=True).start()
                cls._loop = loop
            return cls._loop


class _BridgeModel:
    """The run's model: each request is handed to the framework, its reply taken back."""

    def __init__(self, session: GuardSession, name: str) -> None:
        self.session, self.name = session, name

    async def complete(self, request: ModelRequest) -> ModelReply:
        return await self.session._await_reply(request)


class GuardSession:
    """loopwarden's guard for one run of another framework's agent."""

    def __init__(
        self,
        tools: Sequence[ToolSpec],
        config: LoopConfig | None = None,
        *,
        model_name: str = "framework",
        run_id: str | None = None,
        trace: TraceTarget = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.config = config or LoopConfig()
        self.run_id = run_id or uuid.uuid4().hex
        self.events: list[Event] = []
        self.on_event = on_event
        self.finished: RunFinished | None = None
        self.specs = {s.name: s for s in tools}
        self._agent = Agent(
            _BridgeModel(self, model_name), [self._bridge(s) for s in tools], config=self.config, trace=trace
        )
        self._cond: asyncio.Condition | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: _Pending | None = None
        self._turns = 0
        self._state = _State()
        self._run: Run | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- what adapters call ------------------------------------------------------------------------

    async def next_turn(self, prompt: str | list[Message]) -> Turn | None:
        """The run's next model call, the run started with `prompt` on the first; None once the
        run has finished (or ended without a call: a hard budget)."""
        return await self._on_loop(self._next_turn(prompt))

    async def propose(self, reply: ModelReply) -> list[CallVerdict]:
        """Give the framework model's reply to the run; the verdict on each of its calls."""
        return await self._on_loop(self._propose(reply))

    async def record(self, call_id: str, result: Any) -> None:
        """What a call the framework ran returned: the tool's value (a JSON string is read as
        JSON), a `ToolResult`, or the exception it raised."""
        await self._on_loop(self._record(call_id, result))

    async def answer(self, call_id: str) -> str:
        """The result the model reads for a call the guard answered (cached, refused, stopped)."""
        return await self._on_loop(self._answer(call_id))

    async def close(self) -> None:
        """End the background run if the framework ended first (its own limit, an error)."""
        await self._on_loop(self._close())

    def next_turn_sync(self, prompt: str | list[Message]) -> Turn | None:
        return self._blocking(self._next_turn(prompt))

    def propose_sync(self, reply: ModelReply) -> list[CallVerdict]:
        return self._blocking(self._propose(reply))

    def record_sync(self, call_id: str, result: Any) -> None:
        self._blocking(self._record(call_id, result))

    def answer_sync(self, call_id: str) -> str:
        return self._blocking(self._answer(call_id))

    def close_sync(self) -> None:
        self._blocking(self._close())

    def close_soon(self) -> None:
        """`close` without waiting for it (from code that cannot wait)."""
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop)

    @property
    def verdicts(self) -> dict[str, CallVerdict]:
        """The guard's verdict on every call proposed so far, by call id."""
        return self._state.verdicts

    @property
    def ended(self) -> bool:
        return self.finished is not None

    @property
    def stop_reason(self) -> str | None:
        """Why the guard ended the run; None while it runs or when it completed normally."""
        if self.finished is None or self.finished.status == "completed":
            return None
        return self.finished.stop_reason

    @property
    def stop_message(self) -> str:
        phase = next((e for e in reversed(self.events) if isinstance(e, PhaseEnded)), None)
        return phase.message if phase is not None else (self.stop_reason or "")

    @property
    def output_text(self) -> str:
        """The run's output as text: the answer, the assembled results, or the stop message."""
        output = self.finished.output if self.finished is not None else None
        if output is None or output == "":
            return self.stop_message
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)

    def nudges(self) -> list[NudgeInjected]:
        return [e for e in self.events if isinstance(e, NudgeInjected)]

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run on the session's loop: the caller's own when async code drives the session (no
        thread to cross), else the portal's."""
        running = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = running
        if self._loop is running:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def _blocking(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            self._loop = _Portal.loop()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    # -- on the session's loop ------------------------------------------------------------------------

    async def _next_turn(self, prompt: str | list[Message]) -> Turn | None:
        cond = self._condition()
        if self._task is None:
            self._task = asyncio.create_task(self._drive(prompt))
        for future in self._state.results.values():  # calls the framework went past: they did not run
            if not future.done():
                future.set_result(ToolResult.failure(NOT_RUN, "the agent's framework did not run this call"))
        async with cond:
            await cond.wait_for(lambda: self._pending is not None or self._task_over())
        return self._pending.turn if self._pending is not None else None

    async def _propose(self, reply: ModelReply) -> list[CallVerdict]:
        cond = self._condition()
        pending = self._pending
        if pending is None:
            raise RuntimeError("propose() without a turn: call next_turn() first")
        self._pending = None
        ids = [c.id for c in reply.tool_calls]
        pending.reply.set_result(reply)
        async with cond:
            await cond.wait_for(
                lambda: all(i in self._state.verdicts for i in ids) or self._pending is not None or self._task_over()
            )
        return [self._state.verdicts[i] for i in ids if i in self._state.verdicts]

    async def _record(self, call_id: str, result: Any) -> None:
        if isinstance(result, BaseException):
            result = ToolResult.failure("tool_error", f"{type(result).__name__}: {result}")
        elif isinstance(result, str):
            result = _parsed(result)
        future = self._result_future(call_id)
        if not future.done():
            future.set_result(result)

    async def _answer(self, call_id: str) -> str:
        p = self._state.proposals.get(call_id)
        if p is None:
            return ToolResult.failure("unknown_call", f"the guard saw no call {call_id!r}").to_model_content()
        if p.result is None and p.shares is not None and p.tool is not None:
            shared = p.tool.to_result(await self._result_future(p.shares.call.id))
            return repeat_notice(shared, p.decision.count, p.turn).to_model_content()
        if p.result is None:
            return ToolResult.failure(NOT_RUN, "the guard let this call run").to_model_content()
        return p.result.to_model_content()

    async def _close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- the background run --------------------------------------------------------------------------

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    def _task_over(self) -> bool:
        return self.finished is not None or (self._task is not None and self._task.done())

    async def _notify(self) -> None:
        cond = self._condition()
        async with cond:
            cond.notify_all()

    async def _drive(self, prompt: str | list[Message]) -> None:
        run, stream = self._agent._start(prompt, self.run_id)
        self._run = run
        check = run.checker.check

        def checked(call: Any, turn: int, offered: set[str], alone: bool = False) -> Proposal:
            p = check(call, turn, offered, alone)
            self._state.proposals[call.id] = p
            return p

        run.checker.check = checked  # type: ignore[method-assign]  # the session needs each Proposal
        try:
            async for event in stream:
                self.events.append(event)
                if isinstance(event, GuardVerdict) and event.call_id is not None:
                    self._note_verdict(event)
                if isinstance(event, RunFinished):
                    self.finished = event
                if self.on_event is not None:
                    self.on_event(event)
                await self._notify()
        finally:
            self._pending = None
            await self._notify()

    def _note_verdict(self, event: GuardVerdict) -> None:
        assert event.call_id is not None
        p = self._state.proposals.get(event.call_id)
        runs = p is not None and p.runnable
        self._state.verdicts[event.call_id] = CallVerdict(
            event.call_id, event.tool or "", event.action, event.reason, runs
        )

    async def _await_reply(self, request: ModelRequest) -> ModelReply:
        self._turns += 1
        future: asyncio.Future[ModelReply] = asyncio.get_running_loop().create_future()
        self._pending = _Pending(Turn(self._turns, request, _injected(request.messages)), future)
        await self._notify()
        return await future

    def _result_future(self, call_id: str) -> asyncio.Future[Any]:
        future = self._state.results.get(call_id)
        if future is None:
            future = self._state.results[call_id] = asyncio.get_running_loop().create_future()
        return future

    def _bridge(self, spec: ToolSpec) -> Tool:
        async def answer(**arguments: Any) -> Any:
            call_id = self._claim(spec.name, arguments)
            if call_id is None:
                return ToolResult.failure(NOT_RUN, "no call of this tool is waiting for a result")
            return await self._result_future(call_id)

        return tool_from_schema(
            spec.name,
            spec.parameters,
            answer,
            description=spec.description or spec.name,
            terminal=spec.terminal,
            repeatable=spec.repeatable,
            side_effect=spec.side_effect,
            result_parser=business_failure,
            timeout=None,  # the framework runs the tool under its own limits
        )

    def _claim(self, name: str, arguments: dict[str, Any]) -> str | None:
        """The runnable call this execution stands for: same tool and arguments, first unclaimed."""
        waiting = [
            p
            for i, p in self._state.proposals.items()
            if i not in self._state.claimed and p.runnable and p.tool is not None and p.tool.name == name
        ]
        same = [p for p in waiting if p.validated is not None and getattr(p.validated, "arguments", None) == arguments]
        if not (same or waiting):
            return None
        chosen = (same or waiting)[0]
        self._state.claimed.add(chosen.call.id)
        return chosen.call.id


def _injected(messages: list[Message]) -> list[str]:
    """User messages after the last assistant or tool message: what the runtime added to the
    history for this call (the task's own prompt comes before any assistant message)."""
    tail: list[str] = []
    for message in reversed(messages):
        role = message.get("role")
        if role in ("assistant", "tool"):
            return list(reversed(tail))
        if role == "user" and isinstance(message.get("content"), str):
            tail.append(message["content"])
    return []


def _parsed(content: str) -> Any:
    try:
        return json.loads(content)
    except (json.JSONDecodeError, RecursionError):
        return content
