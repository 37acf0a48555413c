"""Routing requests to intents: rule router, classifier router (incl. one model call with an
enum), low confidence and no match never reaching the full registry."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden import Agent, Budgets, LoopConfig, ModelRequest, Price, ScriptedModel, ToolRegistry, Usage, call, tool
from loopwarden.events import IntentRouted, ModelCalled, RunStarted
from loopwarden.models import FunctionModel, ModelError, ModelReply, ToolCall
from loopwarden.models.scripted import ReplyLike
from loopwarden.policy.router import (
    CLASSIFY_TOOL,
    ClassifierRouter,
    Fallback,
    Intent,
    RuleRouter,
    classifier_request,
    model_classifier,
    parse_classification,
)
from loopwarden.policy.slots import RunClock, SlotSpec, period_slot, regex_extractor

CLOCK = RunClock(datetime(2026, 11, 29, tzinfo=UTC))

REFUND = Intent(
    "refund",
    description="refund an order",
    tools=("get_order", "issue_refund"),
    keywords=("refund", "money back"),
    patterns=(r"\border\s+#?\d+",),
    slots=(SlotSpec("order_id", regex_extractor(r"#?(\d{4,})", group=1), required=True, question="Which order?"),),
    max_tool_rounds=4,
)
TRACK = Intent(
    "track",
    description="where is an order",
    tools=("get_order",),
    keywords=("where", "track", "delivery"),
    excludes=(r"\brefund\b",),
    max_tool_rounds=3,
)
REPORT = Intent(
    "report",
    tools=("sales_report",),
    keywords=("sales", "report"),
    requires=(r"\b(sales|revenue)\b",),
    slots=(SlotSpec("period", period_slot().extract),),
)
INTENTS = [REFUND, TRACK, REPORT]


async def test_rule_router_picks_the_matching_intent_and_fills_slots() -> None:
    r = await RuleRouter(INTENTS).route("I want a refund for order #12345", CLOCK)
    assert r.intent is REFUND and r.method == "rule" and r.confidence == 1.0
    assert r.slots == {"order_id": "12345"} and r.question is None
    assert "refund" in r.evidence


async def test_excludes_and_requires_rule_intents_out() -> None:
    r = await RuleRouter(INTENTS).route("where is my refund", CLOCK)
    assert r.intent is REFUND  # TRACK is excluded by "refund"
    r = await RuleRouter(INTENTS).route("a report on the weather", CLOCK)
    assert r.intent is None  # REPORT requires sales|revenue


async def test_a_missing_required_slot_becomes_the_slots_question() -> None:
    r = await RuleRouter(INTENTS).route("I want my money back", CLOCK)
    assert r.intent is REFUND and r.missing == ("order_id",) and r.question == "Which order?"


async def test_no_match_asks_a_clarifying_question() -> None:
    r = await RuleRouter(INTENTS, fallback=Fallback(question="Refund, tracking or a sales report?")).route(
        "hello there", CLOCK
    )
    assert r.intent is None and r.confidence == 0.0 and r.question == "Refund, tracking or a sales report?"


async def test_an_ambiguous_match_is_low_confidence() -> None:
    a = Intent("a", tools=("x",), keywords=("order",))
    b = Intent("b", tools=("y",), keywords=("order",))
    r = await RuleRouter([a, b]).route("my order", CLOCK)
    assert r.intent is None and r.confidence == 0.5 and r.candidate in {"a", "b"} and r.question


async def test_low_confidence_with_a_safe_set_runs_the_safe_set() -> None:
    fallback = Fallback(safe_tools=("search_help",), max_tool_rounds=2)
    r = await RuleRouter(INTENTS, fallback=fallback).route("hello", CLOCK)
    assert r.intent is not None and r.intent.name == "fallback" and r.intent.tools == ("search_help",)
    assert r.intent.max_tool_rounds == 2 and r.method == "fallback" and r.question is None


def test_duplicate_intent_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="unique"):
        RuleRouter([REFUND, REFUND])


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=80))
def test_rule_router_never_raises_and_never_returns_all_tools(text: str) -> None:
    import asyncio

    r = asyncio.run(RuleRouter(INTENTS).route(text, CLOCK))
    assert 0.0 <= r.confidence <= 1.0
    if r.intent is None:
        assert r.question is not None
    else:
        assert r.intent in INTENTS and (r.question is not None) == bool(r.missing)


# -- classifier router ---------------------------------------------------------------------------


async def test_classifier_router_uses_any_function() -> None:
    def classify(text: str, intents: Sequence[Intent]) -> tuple[str | None, float]:
        return ("report", 0.9) if "sales" in text else (None, 0.0)

    router = ClassifierRouter(INTENTS, classify)
    r = await router.route("sales for the last month", CLOCK)
    assert r.intent is REPORT and r.method == "classifier" and r.slots == {"period": "30d"}
    r = await router.route("hi", CLOCK)
    assert r.intent is None and r.question


async def test_classifier_low_confidence_unknown_name_or_failure_fall_back() -> None:
    async def unsure(text: str, intents: Sequence[Intent]) -> tuple[str | None, float]:
        return "report", 0.3

    r = await ClassifierRouter(INTENTS, unsure).route("sales", CLOCK)
    assert r.intent is None and r.candidate == "report" and r.confidence == 0.3

    r = await ClassifierRouter(INTENTS, lambda t, i: ("delete_everything", 1.0)).route("x", CLOCK)
    assert r.intent is None and r.confidence == 0.0

    def broken(text: str, intents: Sequence[Intent]) -> tuple[str | None, float]:
        raise ModelError("http_503", "upstream down", retryable=True)

    r = await ClassifierRouter(INTENTS, broken).route("sales", CLOCK)
    assert r.intent is None and r.question and "upstream down" in r.evidence[0]


def test_the_classifier_request_forces_one_enum_answer() -> None:
    request = classifier_request("refund order 1234", INTENTS)
    params = request.tools[0]["function"]["parameters"]
    assert params["properties"]["intent"]["enum"] == ["refund", "track", "report", "none"]
    assert request.tool_choice == {"type": "function", "function": {"name": CLASSIFY_TOOL}}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"intent": "track", "confidence": 0.8}', ("track", 0.8)),
        ('{"intent": "track"}', ("track", 1.0)),
        ('{"intent": "track", "confidence": 7}', ("track", 1.0)),
        ('{"intent": "track", "confidence": "high"}', ("track", 0.0)),
        ('{"intent": "none", "confidence": 0.9}', (None, 0.0)),
        ('{"intent": "launch_rockets", "confidence": 1}', (None, 0.0)),
        ("{not json", (None, 0.0)),
        ("[1, 2]", (None, 0.0)),
    ],
)
def test_parse_classification(arguments: str, expected: tuple[str | None, float]) -> None:
    assert parse_classification(arguments, ["refund", "track", "report"]) == expected


async def test_model_classifier_makes_one_forced_call() -> None:
    answer = ToolCall(id="c1", name=CLASSIFY_TOOL, arguments='{"intent": "track", "confidence": 0.95}')
    model = ScriptedModel([ModelReply(tool_calls=[answer])])
    r = await ClassifierRouter(INTENTS, model_classifier(model)).route("where is my parcel", CLOCK)
    assert r.intent is TRACK and r.confidence == 0.95
    assert model.calls == 1 and model.requests[0].tool_choice is not None


async def test_model_classifier_answering_in_text_is_no_match() -> None:
    model = ScriptedModel(["It is about tracking, I think."])
    r = await ClassifierRouter(INTENTS, model_classifier(model)).route("where is my parcel", CLOCK)
    assert r.intent is None and r.question


# -- through the Agent ------------------------------------------------------------------------


def shop() -> ToolRegistry:
    @tool
    def get_order(order_id: str) -> dict[str, str]:
        """Look an order up."""
        return {"order_id": order_id, "status": "shipped"}

    @tool(side_effect="write", roles={"support"})
    def issue_refund(order_id: str) -> dict[str, str]:
        """Refund an order."""
        return {"order_id": order_id, "refunded": "yes"}

    @tool
    def sales_report(period: str) -> str:
        """Sales numbers."""
        return "up"

    @tool
    def search_help(query: str) -> str:
        """Search the help pages."""
        return "See the FAQ."

    return ToolRegistry([get_order, issue_refund, sales_report, search_help])


async def test_agent_offers_only_the_intents_tools_and_records_the_route() -> None:
    model = ScriptedModel([call("get_order", {"order_id": "55555"}), "It has shipped."])
    agent = Agent(model, shop(), router=RuleRouter(INTENTS))
    result = await agent.run("where is my delivery, order 55555")
    started = next(e for e in result.events if isinstance(e, RunStarted))
    routed = next(e for e in result.events if isinstance(e, IntentRouted))
    assert started.intent == "track" and started.tools == ["get_order"]
    assert routed.method == "rule" and routed.tools == ["get_order"] and routed.max_tool_rounds == 3
    offered = [e.tools_offered for e in result.events if isinstance(e, ModelCalled)]
    assert offered == [["get_order"], ["get_order"]]


async def test_agent_without_confidence_asks_and_never_calls_the_model() -> None:
    model = ScriptedModel(["unused"])
    result = await Agent(model, shop(), router=RuleRouter(INTENTS)).run("hmm")
    assert result.status == "paused" and result.stop_reason == "clarification_needed"
    assert result.output and model.calls == 0
    assert [e.type for e in result.events] == ["run_started", "intent_routed", "run_finished"]


async def test_agent_falls_back_to_the_safe_set_not_the_registry() -> None:
    def reply(request: ModelRequest) -> ReplyLike:
        if any(m["role"] == "tool" for m in request.messages):
            return "See the FAQ."
        return call("search_help", {"query": "hmm"})

    model = FunctionModel(reply)
    router = RuleRouter(INTENTS, fallback=Fallback(safe_tools=("search_help",)))
    result = await Agent(model, shop(), router=router).run("hmm")
    offered = [e.tools_offered for e in result.events if isinstance(e, ModelCalled)]
    assert offered[0] == ["search_help"] and result.status == "completed"


async def test_agent_with_intent_instructions_and_a_classifier_model() -> None:
    answer = ToolCall(id="c1", name=CLASSIFY_TOOL, arguments='{"intent": "track", "confidence": 0.9}')
    classifier = ScriptedModel([ModelReply(tool_calls=[answer])], name="cheap")
    track = Intent("track", tools=("get_order",), instructions="Only report the status.")
    model = ScriptedModel(["Shipped."])
    router = ClassifierRouter([track, REFUND], model_classifier(classifier))
    result = await Agent(model, shop(), system="You are a shop assistant.", router=router).run("parcel?")
    assert result.status == "completed"
    system = [m["content"] for m in model.requests[0].messages if m["role"] == "system"]
    assert system == ["You are a shop assistant.", "Only report the status."]
    assert classifier.calls == 1


async def test_the_classifier_model_call_counts_in_totals_and_budgets() -> None:
    answer = ToolCall(id="c1", name=CLASSIFY_TOOL, arguments='{"intent": "track", "confidence": 0.9}')
    usage = Usage(prompt_tokens=120, completion_tokens=8)
    classifier = ScriptedModel([ModelReply(tool_calls=[answer], usage=usage)], name="cheap")
    model = ScriptedModel(["Shipped."], usage=Usage(prompt_tokens=50, completion_tokens=5))
    config = LoopConfig(budgets=Budgets(prices={"cheap": Price(input=1.0, output=2.0)}))
    router = ClassifierRouter([Intent("track", tools=("get_order",))], model_classifier(classifier))
    result = await Agent(model, shop(), router=router, config=config).run("parcel?")
    routed = next(e for e in result.events if isinstance(e, IntentRouted))
    assert routed.model == "cheap" and routed.usage == usage
    assert result.totals.model_calls == 2
    assert result.totals.prompt_tokens == 170 and result.totals.completion_tokens == 13
    assert result.totals.cost == pytest.approx((120 * 1.0 + 8 * 2.0) / 1e6)


async def test_a_model_call_budget_spent_on_routing_stops_the_run() -> None:
    answer = ToolCall(id="c1", name=CLASSIFY_TOOL, arguments='{"intent": "track", "confidence": 0.9}')
    classifier = ScriptedModel([ModelReply(tool_calls=[answer])], name="cheap")
    model = ScriptedModel(["never"])
    config = LoopConfig(budgets=Budgets(max_model_calls=1))
    router = ClassifierRouter([Intent("track", tools=("get_order",))], model_classifier(classifier))
    result = await Agent(model, shop(), router=router, config=config).run("parcel?")
    assert result.stop_reason == "model_call_budget" and model.calls == 0
