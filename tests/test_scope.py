"""The run scope: what a routed run offers, pins and caps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loopwarden import Agent, ScriptedModel, ToolRegistry, ToolResult, call, tool
from loopwarden.events import IntentRouted, RunFinished
from loopwarden.policy.approval import PendingApproval
from loopwarden.policy.router import Fallback, Intent, RuleRouter
from loopwarden.policy.scope import Scope, request_text
from loopwarden.policy.slots import RunClock, SlotSpec, period_slot
from loopwarden.tools.search import ToolSearch


@tool(namespace="metrics")
def trend(metric: str, period: str) -> str:
    """A metric's trend."""
    return "up"


@tool
def note(text: str) -> str:
    """Write a note."""
    return "noted"


@tool(roles={"admin"})
def wipe() -> str:
    """Wipe all metrics."""
    return "wiped"


def registry() -> ToolRegistry:
    r = ToolRegistry([trend, note, wipe])
    r.add(ToolSearch().build_tool(r))
    return r


CLOCK = RunClock(datetime(2026, 11, 29, tzinfo=UTC))
TREND = Intent(
    "trend",
    tools=("metrics.trend",),
    keywords=("trend",),
    slots=(SlotSpec("period", period_slot().extract),),
    max_tool_rounds=2,
)


def test_request_text_reads_the_last_user_message() -> None:
    assert request_text("hi") == "hi"
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "last"},
    ]
    assert request_text(messages) == "last"
    assert request_text([{"role": "system", "content": "s"}]) == ""


async def test_an_intent_fixes_wire_names_pins_and_cap() -> None:
    scope = Scope(registry(), clock=CLOCK)
    route = await scope.open(RuleRouter([TREND]), "trend for the last week", ["note"])
    assert route is not None and scope.base == ["metrics__trend"] and scope.offered() == ["metrics__trend"]
    assert scope.arguments.pinned == {"period": "7d"}
    assert scope.cap_reached(1) is None
    reached = scope.cap_reached(2)
    assert reached is not None and reached[0] == "intent_tool_round_budget" and "'trend'" in reached[1]
    assert scope.route_fields()["pinned"] == {"period": "7d"}


async def test_without_router_or_search_the_agents_offer_stands() -> None:
    scope = Scope(registry(), clock=CLOCK)
    assert await scope.open(None, "anything", ["note", "not_registered"]) is None
    assert scope.offered() == ["note", "not_registered"] and scope.cap_reached(100) is None
    everything = Scope(registry(), clock=CLOCK)
    await everything.open(None, "anything", None)
    assert everything.offered() == ["metrics.trend", "note", "wipe", "search_tools"]


async def test_with_tool_search_the_agents_offer_is_always_offered_too() -> None:
    scope = Scope(registry(), clock=CLOCK, search=ToolSearch(always=("note",)))
    await scope.open(None, "anything", ["metrics.trend", "note"])
    assert scope.base == ["note", "metrics__trend", "search_tools"]


async def test_an_intent_naming_an_unregistered_tool_is_a_clear_error() -> None:
    bad = Intent("bad", tools=("nope",), keywords=("x",))
    with pytest.raises(ValueError, match="nope"):
        await Scope(registry(), clock=CLOCK).open(RuleRouter([bad]), "x", [])


async def test_search_finds_are_offered_within_roles_intent_and_cap() -> None:
    reg = registry()
    search_tool = reg.get("search_tools")
    assert search_tool is not None
    found = ToolResult.success({"found": [{"name": "wipe"}, {"name": "note"}, {"name": "metrics__trend"}]})
    scope = Scope(reg, roles=frozenset({"viewer"}), clock=CLOCK, search=ToolSearch(max_discovered=1))
    await scope.open(None, "hello", [])
    assert scope.base == ["search_tools"]
    newly = scope.observe([(search_tool, found), (None, None), (search_tool, ToolResult.failure("no_match", "x"))])
    assert newly == ["note"]  # wipe needs admin; the cap of one keeps the first find
    assert scope.offered() == ["search_tools", "note"]
    assert scope.offered(narrowed={"note"}) == ["search_tools"]

    limited = Scope(reg, clock=CLOCK, search=ToolSearch())
    await limited.open(RuleRouter([TREND]), "trend", [])
    assert limited.base == ["metrics__trend", "search_tools"]
    assert limited.observe([(search_tool, found)]) == []  # finds outside the intent are dropped


async def test_a_fallback_safe_set_gets_its_own_cap() -> None:
    scope = Scope(registry(), clock=CLOCK)
    await scope.open(RuleRouter([TREND], fallback=Fallback(safe_tools=("note",), max_tool_rounds=1)), "hi", [])
    assert scope.offered() == ["note"] and scope.cap_reached(1) is not None


async def test_a_resumed_run_keeps_its_intent_and_instructions_once() -> None:
    paid: list[float] = []

    @tool(requires_approval=True, side_effect="write")
    def pay_invoice(amount: float) -> str:
        """Pay an invoice."""
        paid.append(amount)
        return "paid"

    pay = Intent("pay", tools=("pay_invoice",), keywords=("pay",), instructions="Pay invoices only.")
    router = RuleRouter([pay])
    paused = await Agent(ScriptedModel([call("pay_invoice", {"amount": 90.0})]), [pay_invoice], router=router).run(
        "pay the invoice"
    )
    assert paused.status == "paused"
    pending = PendingApproval.model_validate(paused.output)
    # A runtime nudge (a user message) before the paused turn must not be mistaken for the request.
    pending.messages.insert(-1, {"role": "user", "content": "You are repeating yourself."})

    model = ScriptedModel(["Paid."])
    events = [
        e async for e in Agent(model, [pay_invoice], router=router).resume(pending, {pending.calls[0].call_id: True})
    ]
    assert next(e for e in events if isinstance(e, IntentRouted)).intent == "pay"
    assert paid == [90.0] and isinstance(events[-1], RunFinished) and events[-1].status == "completed"
    system = [m["content"] for m in model.requests[0].messages if m["role"] == "system"]
    assert system == ["Pay invoices only."]
