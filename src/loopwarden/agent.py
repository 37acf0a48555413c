"""The public surface of the runtime: an `Agent` is a model, tools and guards; each call to
`stream`, `run`, `run_sync`, `stream_text` or `resume` is one run (loop.py).

    async with Agent(model, [lookup], output_type=Answer, deps_type=Deps) as agent:
        result = await agent.run("who is Ada?", deps=Deps(db))
        answer: Answer = result.output
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, cast

from typing_extensions import TypeVar

from .config import LoopConfig, check_config
from .errors import ConfigError, OutputValidationError
from .events import Event, EventStamper, RunFinished, Status, Totals
from .guard import DetectorFactory
from .hotpath.kept import EventsField, KeptEvents
from .loop import Run
from .models.base import Message, Model
from .output import NOT_TYPED, UNSET
from .policy.approval import ApprovalGate, Decision, PendingApproval
from .policy.permissions import Principal
from .policy.router import Router
from .state import ChecklistItem, RunState
from .tools import ToolLike, ToolRegistry
from .tools.search import ToolSearch
from .trace.tracing import Tracer, TraceTarget, resolve_trace
from .verify import Verifier

if TYPE_CHECKING:
    from .tools.mcp import MCPTools

DepsT = TypeVar("DepsT", default=None)
OutputT = TypeVar("OutputT", default=Any)

_V4_KEEP = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_V4_SET = (0x8000 << 48) | (4 << 76)  # the RFC 4122 variant and version 4, as uuid.UUID(version=4) sets them


def new_run_id() -> str:
    """`uuid.uuid4().hex` from the same 16 random bytes, without a UUID instance (its checked
    `__init__` is about 13,000 instructions, once a run)."""
    return f"{int.from_bytes(os.urandom(16), 'big') & _V4_KEEP | _V4_SET:032x}"


@dataclass(repr=False)
class RunResult(Generic[OutputT]):
    run_id: str
    status: Status
    stop_reason: str
    raw_output: Any
    """What ended the run, as its `run_finished` event holds it: the answer (text, or JSON when the
    agent has an `output_type`), a terminal tool's data, a pending approval, a clarifying question."""
    totals: Totals
    events: list[Event]
    """Every event of the run, in order (a run nobody watched builds them when first read: `KEPT`)."""
    messages: list[Message]
    state: RunState
    parsed_output: Any = NOT_TYPED
    """The validated output when the agent has an `output_type` (UNSET when none validated)."""

    @property
    def output(self) -> OutputT:
        """The run's output: the validated `output_type` value when the agent has one (raises
        `OutputValidationError` when the run ended without one), else `raw_output`."""
        if self.parsed_output is NOT_TYPED:
            return self.raw_output  # type: ignore[no-any-return]
        if self.parsed_output is UNSET:
            raise OutputValidationError(
                f"the run ended {self.status} ({self.stop_reason}) without an output of the declared type"
            )
        return self.parsed_output  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        # Short on purpose: Python 3.11's asyncio.run() formats the repr of its main task, result
        # included, when it restores the SIGINT handler; a full repr would cost time per event.
        output = repr(self.raw_output)
        return (
            f"RunResult(run_id={self.run_id!r}, status={self.status!r}, stop_reason={self.stop_reason!r},"
            f" output={output[:80] + '...' if len(output) > 80 else output},"
            f" events=<{KEPT.count(self)}>, messages=<{len(self.messages)}>)"
        )


KEPT = EventsField("events")
setattr(RunResult, "events", KEPT)  # noqa: B010  # after the dataclass: still a field without a default


@dataclass
class Agent(Generic[DepsT, OutputT]):
    """A model, its tools and its guards. Everything after `model` and `tools` is keyword-only."""

    model: Model
    tools: ToolRegistry | Iterable[ToolLike | MCPTools] = ()
    """Tools, functions, and open `MCPTools` (each stands for its server's tools; when the servers
    list more than 20, they are offered behind `ToolSearch` unless `tool_search` is given)."""
    _: KW_ONLY
    system: str | None = None
    output_type: type[OutputT] | None = None
    """The answer's type (a pydantic model, a dataclass, any type pydantic validates): the model is
    told its JSON Schema, a reply that does not validate is sent back with the errors (like a
    verifier, `config.max_verify_retries` times), and `result.output` is the validated value."""
    deps_type: type[DepsT] | None = None
    """The type of `deps=` given to a run and handed to tools that ask for a `RunContext[...]`."""
    config: LoopConfig = field(default_factory=LoopConfig)
    checklist: Sequence[ChecklistItem] = ()
    verifiers: Sequence[Verifier] = ()
    detectors: Sequence[DetectorFactory] | None = None
    """Loop detectors, one fresh set per run; the default set when None (see guard.default_detectors),
    none when empty. `config.disabled_detectors` switches any of them off by name."""
    approvals: ApprovalGate | None = None
    """Decides `requires_approval` calls in process; without one such a call pauses the run (resume())."""
    offered: Sequence[str] | None = None
    """Names of the tools offered each turn; all registered tools when None."""
    router: Router | None = None
    """Routes each request to an intent: its tools, slots, checklist and tool-round budget (policy/router.py)."""
    tool_search: ToolSearch | None = None
    """Progressive disclosure: offer `search_tools` and what it finds, not the registry."""
    principal: Principal | None = None
    """Who runs act for: tools declaring `roles=` need one of its roles. None: no roles checked
    beyond the tools' own (a tool with `roles=` is then refused)."""
    clock: Callable[[], datetime] | None = None
    """Read once at run start; relative dates in the run resolve from it (default: now, UTC)."""
    trace: TraceTarget = None
    """Keep every run: a RunStore or a SQLite path (events and model exchanges), or a callable
    taking each event. None follows LOOPWARDEN_TRACE_DB, read here once; False never traces."""

    def __post_init__(self) -> None:
        check_config(self.config)
        self.trace = resolve_trace(self.trace)
        if not isinstance(self.tools, ToolRegistry):
            items = cast("Iterable[ToolLike]", self.tools)
            if "loopwarden.tools.mcp" in sys.modules:  # an MCPTools exists only once its module is loaded
                from .tools.mcp import offer_servers

                items, self.tool_search = offer_servers(self.tools, self.tool_search)
            self.tools = ToolRegistry(items)
        if self.tool_search is not None and self.tool_search.name not in self.tools:
            self.tools.add(self.tool_search.build_tool(self.tools))

    @property
    def registry(self) -> ToolRegistry:
        assert isinstance(self.tools, ToolRegistry)
        return self.tools

    # -- running -------------------------------------------------------------------------------

    def stream(
        self,
        prompt: str | list[Message],
        *,
        deps: DepsT | None = None,
        run_id: str | None = None,
        stamper: EventStamper | None = None,
    ) -> AsyncIterator[Event]:
        """Run and yield events. Pass a `stamper` to number this run's events within a larger
        sequence (a pipeline running several phases under one run id)."""
        run_id = stamper.run_id if stamper else run_id or new_run_id()
        return self._start(prompt, run_id, stamper, deps=deps)[1]

    async def run(
        self, prompt: str | list[Message], *, deps: DepsT | None = None, run_id: str | None = None
    ) -> RunResult[OutputT]:
        return await self._collect(prompt, run_id or new_run_id(), deps, None)

    def run_sync(
        self, prompt: str | list[Message], *, deps: DepsT | None = None, run_id: str | None = None
    ) -> RunResult[OutputT]:
        """`run` for code that is not async. Inside a running event loop (a notebook, an async
        web handler) the run goes to a worker thread with its own loop, and this call waits."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(prompt, deps=deps, run_id=run_id))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="loopwarden-run-sync") as pool:
            return pool.submit(asyncio.run, self.run(prompt, deps=deps, run_id=run_id)).result()

    def stream_text(
        self, prompt: str | list[Message], *, deps: DepsT | None = None, run_id: str | None = None
    ) -> TextStream[OutputT]:
        """The model's text as it arrives (`async for delta in agent.stream_text(...)`), through
        the model client's streaming; the guard still sees each whole reply. After the loop,
        `.result` is the run's `RunResult`."""
        return TextStream(self, prompt, deps, run_id or new_run_id())

    def resume(
        self,
        pending: PendingApproval,
        decisions: Mapping[str, bool | Decision],
        *,
        deps: DepsT | None = None,
        stamper: EventStamper | None = None,
    ) -> AsyncIterator[Event]:
        """Continue a run that paused for approval (policy/approval.py), with a decision per call id."""
        agent = replace(self, approvals=ApprovalGate.with_decisions(decisions, self.approvals))
        run_id = stamper.run_id if stamper else pending.run_id
        run, stream = agent._start(pending.messages, run_id, stamper, deps=deps)
        run.messages, run.turn, run.replay = list(pending.messages), pending.turn, pending.replay()
        return stream

    # -- closing -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the model clients this agent holds (its model's, and the agents it hands off to)."""
        for model in {id(m): m for m in self._models()}.values():
            closing = getattr(model, "aclose", None)
            if closing is not None:
                await closing()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    def _models(self) -> list[Model]:
        from .handoff import HandoffTool

        models = [self.model]
        for tool in self.registry:
            if isinstance(tool, HandoffTool):
                models += tool.target._models()
        return models

    # -- inside ----------------------------------------------------------------------------------

    def _start(
        self,
        prompt: str | list[Message],
        run_id: str,
        stamper: EventStamper | None = None,
        *,
        deps: Any = None,
        on_text: Callable[[str], None] | None = None,
        keep: bool = False,
    ) -> tuple[Run, AsyncIterator[Any]]:
        """A run and its event stream, through the tracer when this agent traces (trace/tracing.py).
        `keep`: nobody reads the events before the run ends, so a store may be given the step
        events as their dicts (hotpath/kept.py); its stream is then of each commit's events and
        kept ones, a list a commit (trace/recorder.py)."""
        wanted = self.deps_type
        if deps is not None and isinstance(wanted, type) and not isinstance(deps, wanted):
            raise ConfigError(f"deps is a {type(deps).__name__}; this agent's deps_type is {wanted.__name__}")
        if not isinstance(self.trace, Tracer):
            run = Run(self, prompt, run_id, stamper, deps=deps, on_text=on_text)
            return run, run.events()
        tracer = self.trace

        def traced(model: Model) -> Model:  # this agent's model, and those of agents it hands off to
            return tracer.model(model, run_id)

        run = Run(replace(self, model=traced(self.model), trace=False), prompt, run_id, stamper, deps=deps,
                  on_text=on_text, wrap_model=traced)  # fmt: skip
        if keep and tracer.store is not None:
            return run, tracer.record(run.events(), run_id, run.stamp)
        return run, tracer.record(run.events(), run_id)

    async def _collect(
        self, prompt: str | list[Message], run_id: str, deps: Any, on_text: Callable[[str], None] | None
    ) -> RunResult[OutputT]:
        tracer = self.trace if isinstance(self.trace, Tracer) else None
        run, stream = self._start(prompt, run_id, deps=deps, on_text=on_text, keep=True)
        if tracer is not None and tracer.store is None:  # a sink reads every event as it comes
            made = [event async for event in stream]
            events: list[Event] | KeptEvents = made
            last = made[-1]
        else:  # nobody reads them before the result: the step events are kept as their dicts
            kept: list[Any] = []
            if tracer is None:
                run.stamp.kept, run.stamp.later = kept, True
                async for event in stream:
                    kept.append(event)
            else:  # the recorder keeps them, commits them and passes each commit's on
                async for batch in stream:
                    kept += batch
            events, last = KeptEvents(kept), kept[-1]
        assert isinstance(last, RunFinished)
        final = run.final()
        return RunResult(
            run.run_id,
            last.status,
            last.stop_reason,
            last.output,
            last.totals,
            events,  # type: ignore[arg-type]  # KeptEvents too: KEPT builds them when read
            final.messages,
            final.state,
            NOT_TYPED if final.output is None else final.output.value,
        )


class TextStream(Generic[OutputT]):
    """Text deltas of one run, in order; `result` once the iteration has ended."""

    def __init__(self, agent: Agent[Any, OutputT], prompt: str | list[Message], deps: Any, run_id: str) -> None:
        self._agent, self._prompt, self._deps, self.run_id = agent, prompt, deps, run_id
        self.result: RunResult[OutputT] | None = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._deltas()

    async def _deltas(self) -> AsyncIterator[str]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        async def drive() -> None:
            try:
                self.result = await self._agent._collect(self._prompt, self.run_id, self._deps, queue.put_nowait)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(drive())
        try:
            while (delta := await queue.get()) is not None:
                yield delta
            await task  # the run's own error, if it raised
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
