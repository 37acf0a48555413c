"""Tool search (progressive disclosure) over a large registry, and through the Agent."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden import Agent, FunctionModel, ModelRequest, ToolRegistry, call, tool
from loopwarden.events import ModelCalled, ToolCallFinished, ToolsDiscovered
from loopwarden.models import ToolCall, offered_tool_names
from loopwarden.models.scripted import ReplyLike
from loopwarden.policy.permissions import Principal
from loopwarden.tools import Tool
from loopwarden.tools.search import SEARCH_TOOL, ToolIndex, ToolSearch, found_names, keep_recent, tokens

NAMESPACES = ["crm", "billing", "calendar", "files", "weather", "mail", "hr", "inventory", "support", "analytics"]
VERBS = ["get", "list", "create", "update", "delete", "export", "archive", "search", "count", "sync"]
OBJECTS = {
    "crm": "customer contact",
    "billing": "invoice payment",
    "calendar": "meeting event",
    "files": "document folder",
    "weather": "forecast temperature",
    "mail": "email message",
    "hr": "employee leave",
    "inventory": "stock item",
    "support": "ticket complaint",
    "analytics": "report metric",
}


def make_tool(namespace: str, verb: str, index: int) -> Tool:
    things = OBJECTS[namespace]

    def fn(query: str = "") -> dict[str, Any]:
        return {"tool": f"{namespace}.{verb}_{index}", "query": query}

    description = f"{verb.capitalize()} {things} records in the {namespace} system (variant {index})."
    return tool(name=f"{verb}_{things.split()[0]}_{index}", namespace=namespace, description=description)(fn)


def big_registry() -> ToolRegistry:
    """200 tools: 10 namespaces x 10 verbs x 2 variants, many of them alike."""
    registry = ToolRegistry(make_tool(ns, verb, i) for ns in NAMESPACES for verb in VERBS for i in (1, 2))

    @tool(namespace="weather", description="The weather forecast for a city: temperature and rain for the next days.")
    def city_forecast(city: str) -> dict[str, Any]:
        return {"city": city, "forecast": "rain", "high_c": 11}

    registry.add(city_forecast)
    return registry


def test_tokens_split_names_and_stem_plurals() -> None:
    assert tokens("getMetricTrends") == ["get", "metric", "trend"]
    assert tokens("crm.list_customers") == ["crm", "list", "customer"]
    assert tokens("the of and") == []


def test_index_ranks_the_matching_tool_first() -> None:
    registry = big_registry()
    index = ToolIndex(registry)
    found = index.search("weather forecast for a city", 5)
    assert found[0][0].qualified_name == "weather.city_forecast"
    assert len(found) <= 5
    assert all(score > 0 for _, score in found)
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True)


def test_index_returns_nothing_for_unrelated_or_empty_queries() -> None:
    index = ToolIndex(big_registry())
    assert index.search("", 5) == []
    assert index.search("xylophone quasar", 5) == []
    assert ToolIndex([]).search("anything", 5) == []


SMALL_INDEX = ToolIndex(list(big_registry())[:30])


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80), st.integers(min_value=-2, max_value=300))
def test_search_never_raises_and_respects_the_limit(query: str, limit: int) -> None:
    found = SMALL_INDEX.search(query, limit)
    assert len(found) <= max(limit, 0)


async def test_the_search_tool_reports_no_match_as_a_structured_failure() -> None:
    registry = big_registry()
    search = ToolSearch(limit=3).build_tool(registry)
    raw = await search.call(search.args_model.model_validate({"query": "xylophone"}))
    result = search.to_result(raw)
    assert not result.ok and result.error_type == "no_match" and result.user_action
    raw = await search.call(search.args_model.model_validate({"query": "invoice payment", "limit": 50}))
    names = found_names(search.to_result(raw))
    assert 1 <= len(names) <= 3 and all(n.startswith("billing__") for n in names)


def test_keep_recent_puts_new_finds_first_and_caps() -> None:
    assert keep_recent(["a", "b"], ["c", "a"], 3) == ["c", "a", "b"]
    assert keep_recent(["a", "b"], ["c"], 0) == []


def searching_model(query: str, target: str, arguments: dict[str, Any]) -> FunctionModel:
    """Searches first; calls `target` once it is offered; then answers from its result."""

    def reply(request: ModelRequest) -> ReplyLike:
        results = [str(m["content"]) for m in request.messages if m["role"] == "tool"]
        if any("high_c" in content for content in results):
            return "Rain tomorrow in Oslo, high of 11 °C."
        if target in offered_tool_names(request):
            return call(target, arguments)
        return call(SEARCH_TOOL, {"query": query})

    return FunctionModel(reply)


async def test_agent_offers_a_handful_finds_the_tool_and_uses_it_next_turn() -> None:
    registry = big_registry()
    assert len(registry) == 201
    model = searching_model("weather forecast for a city", "weather__city_forecast", {"city": "Oslo"})
    agent = Agent(model, registry, tool_search=ToolSearch(limit=5, max_discovered=6))
    result = await agent.run("What is the weather in Oslo tomorrow?")

    calls = [e for e in result.events if isinstance(e, ModelCalled)]
    assert calls[0].tools_offered == [SEARCH_TOOL]
    assert all(c.n_tools_offered <= 7 for c in calls)
    assert "weather__city_forecast" in calls[1].tools_offered
    discovered = [e for e in result.events if isinstance(e, ToolsDiscovered)]
    assert discovered and "weather__city_forecast" in discovered[0].tools
    assert discovered[0].n_tools_offered_next == calls[1].n_tools_offered
    used = [e for e in result.events if isinstance(e, ToolCallFinished) and e.tool == "weather__city_forecast"]
    assert len(used) == 1 and used[0].ok and used[0].executed and used[0].turn == 2
    assert result.status == "completed" and "Oslo" in str(result.output)


async def test_a_found_tool_called_in_the_same_turn_is_not_allowed() -> None:
    registry = big_registry()
    both: list[ToolCall] = [
        call(SEARCH_TOOL, {"query": "weather forecast for a city"}),
        call("weather__city_forecast", {"city": "Oslo"}),
    ]
    replies = iter([both, "done"])
    agent = Agent(FunctionModel(lambda r: next(replies)), registry, tool_search=ToolSearch())
    result = await agent.run("weather in Oslo")
    refused = next(e for e in result.events if isinstance(e, ToolCallFinished) and e.tool == "weather__city_forecast")
    assert refused.error_type == "not_allowed" and not refused.executed


async def test_found_tools_outside_the_principals_roles_are_not_offered() -> None:
    registry = ToolRegistry()

    @tool(roles={"admin"}, description="Delete every customer record in the CRM.")
    def purge_customers() -> str:
        return "purged"

    @tool(description="List customer records in the CRM.")
    def list_customers() -> list[str]:
        return ["ada"]

    registry.add(purge_customers)
    registry.add(list_customers)
    replies = iter([call(SEARCH_TOOL, {"query": "customer records crm"}), "done"])
    model = FunctionModel(lambda r: next(replies))
    agent = Agent(model, registry, tool_search=ToolSearch(), principal=Principal.of("u1", ["viewer"]))
    result = await agent.run("customers?")
    found = next(e for e in result.events if isinstance(e, ToolCallFinished) and e.tool == SEARCH_TOOL)
    assert found.ok
    offered_second = offered_tool_names(model.requests[1])
    assert "list_customers" in offered_second and "purge_customers" not in offered_second
    discovered = next(e for e in result.events if isinstance(e, ToolsDiscovered))
    assert discovered.tools == ["list_customers"]


async def test_the_search_result_reaches_the_model_as_json() -> None:
    registry = big_registry()
    replies = iter([call(SEARCH_TOOL, {"query": "email message"}), "done"])
    model = FunctionModel(lambda r: next(replies))
    await Agent(model, registry, tool_search=ToolSearch(limit=2)).run("mail")
    content = json.loads(model.requests[1].messages[-1]["content"])
    assert content["ok"] is True and len(content["data"]["found"]) == 2
    assert all(item["name"].startswith("mail__") for item in content["data"]["found"])


async def test_tools_added_after_the_first_search_are_found() -> None:
    registry = big_registry()
    search = ToolSearch().build_tool(registry)
    query = search.args_model.model_validate({"query": "translate text into french"})
    assert not search.to_result(await search.call(query)).ok

    @tool(description="Translate text into French or another language.")
    def translate(text: str, language: str) -> str:
        return text

    registry.add(translate)
    assert found_names(search.to_result(await search.call(query)))[0] == "translate"
