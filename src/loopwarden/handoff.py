"""Handoff: one agent's terminal tool hands the conversation to another agent, which goes on
with its own system prompt, tools, guard state and budgets, under the same run id.

    billing = Agent(model, [refund, finish], system="You handle billing.")
    triage = Agent(model, [lookup, handoff(billing, description="billing questions")])

The model calls `transfer_to_billing(reason=...)`; the run emits `handed_off` and the billing
agent's turns follow in the same event stream, ending with one `run_finished` whose totals
cover both agents.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from .ending import phase_event
from .errors import ToolDefinitionError
from .events import Event, HandedOff
from .proposals import Proposal
from .tools import Tool

if TYPE_CHECKING:
    from .agent import Agent
    from .loop import Run


@dataclass(frozen=True)
class HandoffTool(Tool):
    """A terminal tool whose success hands the run to `target`."""

    target: Any = None
    """The `Agent` the conversation goes to."""

    async def call(self, arguments: BaseModel) -> Any:
        return {"handed_to": self.name, "reason": getattr(arguments, "reason", "")}


def handoff(target: Agent[Any, Any], *, name: str, description: str | None = None) -> HandoffTool:
    """A tool named `name` (e.g. "transfer_to_billing") that hands the conversation to `target`."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise ToolDefinitionError(f"handoff tool name {name!r}: use letters, digits, _ and - (at most 64)")
    args: type[BaseModel] = create_model(
        f"{name.title().replace('_', '')}Args",
        __config__=ConfigDict(extra="forbid"),
        reason=(str, Field("", description="why the conversation goes on there, for the next agent")),
    )
    return HandoffTool(
        name=name,
        description=description or f"Hand the conversation over ({name}).",
        fn=lambda reason="": None,
        args_model=args,
        terminal=True,
        result_parser=None,
        is_async=True,
        target=target,
    )


async def hand_off(run: Run, proposal: Proposal, tool: HandoffTool) -> AsyncIterator[Event]:
    """The conversation so far, without this agent's system messages, goes on as a run of the
    target agent: its tools, guard state and budgets, this run's id and numbering."""
    target: Agent[Any, Any] = tool.target
    if run.wrap_model is not None:  # traced: the target's model exchanges are kept too
        target = replace(target, model=run.wrap_model(target.model), trace=False)
    yield phase_event(run, "handoff", "completed", f"{proposal.call.name} handed the conversation over")
    carried = [m for m in run.messages if m.get("role") != "system"]  # the target's own come first
    nxt = type(run)(
        target,
        carried,
        run.run_id,
        run.stamp,
        deps=run.deps,
        on_text=run.on_text,
        handed_from=run,
        wrap_model=run.wrap_model,
    )
    run.handed_to, run.done = nxt, True
    run.totals.duration_s = time.monotonic() - run.started
    run.totals.duplicates_avoided = run.checker.duplicates_avoided
    yield run.stamp(
        HandedOff,
        turn=run.turn,
        tool=proposal.call.name,
        model=target.model.name,
        tools=nxt.offered,
        reason=str(getattr(proposal.validated, "reason", "") or ""),
    )
    async for event in nxt.events():
        yield event
