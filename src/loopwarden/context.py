"""What a tool may ask the runtime for: the run's dependencies, by annotation.

    @dataclass
    class Deps:
        db: Database

    @tool
    def lookup(ctx: RunContext[Deps], name: str) -> str:
        return ctx.deps.db.find(name)

    agent = Agent(model, [lookup], deps_type=Deps)
    result = await agent.run("who is Ada?", deps=Deps(db))

The `RunContext` parameter is filled by the runtime and never appears in the tool's schema: the
model can neither see it nor pass it.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .hotpath.frozen import quick_init

DepsT = TypeVar("DepsT")


@quick_init
@dataclass(frozen=True)
class RunContext(Generic[DepsT]):
    """Handed to a tool that declares a parameter annotated `RunContext[...]`."""

    deps: DepsT
    """What the caller passed as `deps=` to `Agent.run` (None when nothing was passed)."""
    run_id: str
    turn: int
    """The model turn whose call is being run."""


current_context: ContextVar[RunContext[Any] | None] = ContextVar("loopwarden_run_context", default=None)
"""The context of the calls being executed; set by the loop around each turn's execution (tasks
and worker threads started from there inherit it), read by `Tool.call`."""


def context_now() -> RunContext[Any]:
    """The current run's context; outside a run (a tool called directly), one with no deps."""
    return current_context.get() or RunContext(None, "", 0)
