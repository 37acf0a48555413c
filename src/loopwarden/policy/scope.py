"""A run's scope: what it may do, decided by code when it starts and kept for the whole run.

It holds the routing decision (intent, slots, clarifying question), the tools offered (the
intent's small set, or `search_tools` plus what searches found, never the full registry when a
router or tool search is in charge), the argument policy (normalisers and pinned slots), the
principal's roles and the intent's tool-round budget. The loop asks it; it never runs anything itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..events import Totals
from ..guard.budget import Budgets
from ..models.base import Message
from ..state import ChecklistItem
from ..tools import Tool, ToolRegistry, ToolResult
from ..tools.search import ToolSearch, found_names, keep_recent
from .permissions import permits
from .router import Intent, Route, Router
from .slots import ArgumentPolicy, RunClock, pinned_arguments

INTENT_TOOL_ROUND_BUDGET = "intent_tool_round_budget"


def request_text(prompt: str | list[Message], *, latest: bool = True) -> str:
    """What a router reads: the prompt, or the last user message of a conversation (the first
    when resuming a paused run, whose later user messages may be the runtime's own nudges)."""
    if isinstance(prompt, str):
        return prompt
    for message in reversed(prompt) if latest else prompt:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


@dataclass
class Scope:
    registry: ToolRegistry
    roles: frozenset[str] | None = None
    clock: RunClock = field(default_factory=RunClock)
    search: ToolSearch | None = None
    route: Route | None = None
    base: list[str] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)
    max_tool_rounds: int | None = None
    arguments: ArgumentPolicy = field(init=False)
    _offer: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.arguments = ArgumentPolicy(self.clock)

    @property
    def intent(self) -> Intent | None:
        return self.route.intent if self.route else None

    @property
    def question(self) -> str | None:
        return self.route.question if self.route else None

    async def open(self, router: Router | None, text: str, offered: Sequence[str] | None) -> Route | None:
        """Route the request (if a router is set) and fix what this run offers. `offered` is the
        agent's own list (None = every registered tool, unless a router or tool search decides)."""
        if router is not None:
            self.route = await router.route(text, self.clock)
        intent = self.intent
        if intent is not None:
            names = list(intent.tools)
            self.max_tool_rounds = intent.max_tool_rounds
            pinned = pinned_arguments(intent.slots, self.route.slots if self.route else {})
            self.arguments.extend(intent.normalisers, pinned)
        elif self.search is not None:
            names = [*self.search.always, *(offered or ())]
        else:  # neither a router nor tool search in charge: the agent's offer, as given
            self.base = list(offered if offered is not None else self.registry.names())
            return self.route
        if self.search is not None:
            names.append(self.search.name)
        self.base = list(dict.fromkeys(self._wire(name) for name in names))
        return self.route

    def _wire(self, name: str) -> str:
        found = self.registry.get(name)
        if found is None:
            raise ConfigError(f"intent or tool search names an unregistered tool: {name!r}")
        return found.wire_name

    def offered(self, narrowed: Iterable[str] = ()) -> list[str]:
        """The tool names offered next, narrowed. Read it, do not change it: the common turn's,
        the base offer, is one list while the base stands (a run keeps each turn's offer for its
        `model_called` event, which copies it when built: one list a run, not one a step)."""
        if not narrowed and not self.discovered:
            if self._offer != self.base:
                self._offer = list(self.base)
            return self._offer
        hidden = set(narrowed)
        return [name for name in [*self.base, *self.discovered] if name not in hidden]

    def checklist(self) -> tuple[ChecklistItem, ...]:
        return self.intent.checklist if self.intent else ()

    def instructions(self) -> str | None:
        return self.intent.instructions if self.intent else None

    def cap_reached(self, tool_rounds: int) -> tuple[str, str] | None:
        """(stop_reason, message) once the intent's own tool-round budget is used up."""
        if self.max_tool_rounds is None or tool_rounds < self.max_tool_rounds:
            return None
        name = self.intent.name if self.intent else "this request"
        used = f"{tool_rounds} of {self.max_tool_rounds} tool rounds"
        return INTENT_TOOL_ROUND_BUDGET, f"tool-round budget of intent {name!r} reached: {used}"

    def observe(self, results: Iterable[tuple[Tool | None, ToolResult | None]]) -> list[str]:
        """Take up tools found by `search_tools`; returns the names newly offered from the next turn."""
        if self.search is None:
            return []
        found: list[str] = []
        for tool, result in results:
            if tool is None or result is None or tool.qualified_name != self.search.name:
                continue
            found += [name for name in found_names(result) if self._may_offer(name)]
        new = [name for name in dict.fromkeys(found) if name not in self.base and name not in self.discovered]
        if found:
            self.discovered = keep_recent(self.discovered, list(dict.fromkeys(found)), self.search.max_discovered)
        return [name for name in new if name in self.discovered]

    def _may_offer(self, name: str) -> bool:
        tool = self.registry.get(name)
        if tool is None or not permits(tool, self.roles):
            return False
        intent = self.intent
        return intent is None or tool.qualified_name in intent.tools or tool.wire_name in intent.tools

    def charge(self, totals: Totals, budgets: Budgets) -> None:
        """Count routing's own model call (a classifier) in the run's totals and budgets."""
        route = self.route
        if route is None or route.usage is None:
            return
        totals.model_calls += 1
        totals.add_usage(route.usage)
        totals.cost += budgets.cost_of(route.model or "", route.usage)

    def route_fields(self) -> dict[str, Any]:
        route = self.route
        assert route is not None
        return {
            "intent": route.intent_name,
            "candidate": route.candidate,
            "confidence": route.confidence,
            "method": route.method,
            "slots": {k: v for k, v in route.slots.items()},
            "pinned": dict(self.arguments.pinned),
            "missing": list(route.missing),
            "question": route.question,
            "tools": list(self.base),
            "max_tool_rounds": self.max_tool_rounds,
            "evidence": list(route.evidence),
            "model": route.model,
            "usage": route.usage,
        }
