"""The public surface of the runtime: an `Agent` is a model, tools and guards; each call to
`stream`, `run`, `run_sync` or `resume` is one run (loop.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime
from typing import Any

from .approval import ApprovalGate, Decision, PendingApproval
from .config import LoopConfig
from .events import Event, EventStamper, RunFinished, Status, Totals
from .guard import DetectorFactory
from .loop import Run
from .models.base import Message, Model
from .permissions import Principal
from .router import Router
from .state import ChecklistItem, RunState
from .tools import ToolLike, ToolRegistry
from .toolsearch import ToolSearch
from .trace.tracing import Tracer, TraceTarget, resolve_trace
from .verify import Verifier


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


@dataclass
class Agent:
    """A model, its tools and its guards. Everything after `model` and `tools` is keyword-only."""

    model: Model
    tools: ToolRegistry | Iterable[ToolLike] = ()
    _: KW_ONLY
    system: str | None = None
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
    """Routes each request to an intent: its tools, slots, checklist and tool-round budget (router.py)."""
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
        self.trace = resolve_trace(self.trace)
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
        return self._start(prompt, run_id, stamper)[1]

    async def run(self, prompt: str | list[Message], *, run_id: str | None = None) -> RunResult:
        run, stream = self._start(prompt, run_id or uuid.uuid4().hex)
        events = [event async for event in stream]
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
        run, stream = agent._start(pending.messages, stamper.run_id if stamper else pending.run_id, stamper)
        run.messages, run.turn, run.replay = list(pending.messages), pending.turn, pending.replay()
        return stream

    def _start(
        self, prompt: str | list[Message], run_id: str, stamper: EventStamper | None = None
    ) -> tuple[Run, AsyncIterator[Event]]:
        """A run and its event stream, through the tracer when this agent traces (trace/tracing.py)."""
        if not isinstance(self.trace, Tracer):
            run = Run(self, prompt, run_id, stamper)
            return run, run.events()
        tracer = self.trace
        run = Run(replace(self, model=tracer.model(self.model, run_id), trace=False), prompt, run_id, stamper)
        return run, tracer.record(run.events())
