"""Budgets per conversation, next to the per-task ones: what the conversation's earlier tasks spent
is read from the request's own history (every assistant turn before the current task's user
message is a model call, one with tool calls a tool round; tokens are estimated from the history
at four characters a token, as for the current task), so a conversation is capped as a whole with
no state in the proxy: a restart, another proxy process, or a resumed run all count the same."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..events import Totals
from ..guard.budget import Budgets, Price
from ..models.base import Message, Usage
from .history import content_text


@dataclass(frozen=True)
class ConversationLimits:
    """Caps on a whole conversation (`--conversation-max-*`); None leaves one off."""

    max_model_calls: int | None = None
    max_tool_rounds: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None

    def any(self) -> bool:
        return any(v is not None for v in (self.max_model_calls, self.max_tool_rounds, self.max_tokens, self.max_cost))


def spent_before(opening: list[Message], price: Price | None = None) -> Totals:
    """What the conversation's earlier tasks spent: the assistant turns in `opening` (the messages
    up to the current task's user message), each estimated the way the replay estimates a turn."""
    totals = Totals()
    sent = 0  # characters of the messages before the current one: the turn's prompt
    for message in opening:
        if message.get("role") == "assistant":
            calls = message.get("tool_calls") or []
            said = len(content_text(message.get("content"))) + sum(_call_size(c) for c in calls if isinstance(c, dict))
            usage = Usage(prompt_tokens=sent // 4, completion_tokens=max(1, said // 4))
            totals.model_calls += 1
            totals.tool_rounds += 1 if calls else 0
            totals.add_usage(usage)
            totals.cost += price.cost(usage) if price is not None else 0.0
        sent += len(json.dumps(message, ensure_ascii=False, default=str))
    return totals


@dataclass(frozen=True)
class ConversationBudgets(Budgets):
    """The task's budgets, then the conversation's over the earlier tasks' spend plus this task's."""

    conversation: ConversationLimits = field(default_factory=ConversationLimits)
    before: Totals = field(default_factory=Totals)

    def exhausted(self, totals: Totals, elapsed: float) -> tuple[str, str] | None:
        spent = super().exhausted(totals, elapsed)
        if spent is not None:
            return spent
        limits, before = self.conversation, self.before
        checks: list[tuple[str, float | None, float, str]] = [
            ("tool_round", limits.max_tool_rounds, before.tool_rounds + totals.tool_rounds, "tool rounds"),
            ("model_call", limits.max_model_calls, before.model_calls + totals.model_calls, "model calls"),
            ("token", limits.max_tokens, before.total_tokens + totals.total_tokens, "tokens"),
            ("cost", limits.max_cost, before.cost + totals.cost, "cost"),
        ]
        for name, limit, used, unit in checks:
            if limit is not None and used >= limit:
                message = f"conversation budget exhausted: {used:g} of {limit:g} {unit} used over the conversation"
                return f"conversation_{name}_budget", message
        return None


def with_conversation(budgets: Budgets, limits: ConversationLimits, before: Totals) -> Budgets:
    if not limits.any():
        return budgets
    fields: dict[str, Any] = {name: getattr(budgets, name) for name in Budgets.__dataclass_fields__}
    return ConversationBudgets(**fields, conversation=limits, before=before)


def _call_size(raw: dict[str, Any]) -> int:
    function = raw.get("function")
    if not isinstance(function, dict):
        return 0
    arguments = function.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return len(str(function.get("name") or "")) + len(text)
