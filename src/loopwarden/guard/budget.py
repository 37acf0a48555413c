"""Budgets: a fuse on steps, model calls, tokens, wall-clock time and cost, each with its
own stop reason. They hold independently of the detectors."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import Totals
from ..hotpath.frozen import quick_init
from ..models.base import Usage


@dataclass(frozen=True)
class Price:
    """Price per million tokens, in any currency the user picks."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        fresh = max(usage.prompt_tokens - usage.cached_tokens, 0)
        return (fresh * self.input + usage.cached_tokens * cached_rate + usage.completion_tokens * self.output) / 1e6


@quick_init  # as LoopConfig
@dataclass(frozen=True)
class Budgets:
    max_tool_rounds: int | None = 20
    max_model_calls: int | None = 50
    max_tokens: int | None = None
    max_seconds: float | None = None
    max_cost: float | None = None
    prices: dict[str, Price] = field(default_factory=dict)

    def cost_of(self, model: str, usage: Usage) -> float:
        price = self.prices.get(model)
        return price.cost(usage) if price else 0.0

    def exhausted(self, totals: Totals, elapsed: float) -> tuple[str, str] | None:
        """(stop_reason, message) for the first budget used up, checked before a model call."""
        # Checked in this order; written out, as it runs before every model call. The counts read
        # from the totals' own values once (a pydantic instance's attributes go through its hook).
        counts = totals.__dict__
        if self.max_tool_rounds is not None and counts["tool_rounds"] >= self.max_tool_rounds:
            return _spent("tool_round_budget", counts["tool_rounds"], self.max_tool_rounds, "tool rounds")
        if self.max_model_calls is not None and counts["model_calls"] >= self.max_model_calls:
            return _spent("model_call_budget", counts["model_calls"], self.max_model_calls, "model calls")
        if self.max_tokens is not None and totals.total_tokens >= self.max_tokens:
            return _spent("token_budget", totals.total_tokens, self.max_tokens, "tokens")
        if self.max_seconds is not None and elapsed >= self.max_seconds:
            return _spent("time_budget", elapsed, self.max_seconds, "seconds")
        if self.max_cost is not None and totals.cost >= self.max_cost:
            return _spent("cost_budget", totals.cost, self.max_cost, "cost")
        return None

    def remaining_seconds(self, elapsed: float) -> float | None:
        return None if self.max_seconds is None else max(self.max_seconds - elapsed, 0.0)


def _spent(reason: str, used: float, limit: float, unit: str) -> tuple[str, str]:
    return reason, f"budget exhausted: {used:g} of {limit:g} {unit} used"


HARD_BUDGET_REASONS = frozenset(
    {"model_call_budget", "token_budget", "time_budget", "cost_budget"}
    | {"conversation_model_call_budget", "conversation_token_budget", "conversation_cost_budget"}
)
"""Budgets after which not even a wrap-up model call is made."""
