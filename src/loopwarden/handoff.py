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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from .errors import ToolDefinitionError
from .tools import Tool

if TYPE_CHECKING:
    from .agent import Agent


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
