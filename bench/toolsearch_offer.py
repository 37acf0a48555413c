"""How much tool schema a model is sent per turn: a 200-tool registry offered in full (the
baseline) against progressive disclosure with `search_tools`, measured in the same run.

    python bench/toolsearch_offer.py

Prints sizes (characters of the `tools=[...]` JSON, a proxy for prompt tokens) and ratios,
and the time of one BM25 search against the time to serialise the full registry once.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from loopwarden import Agent, FunctionModel, ModelRequest, ToolRegistry, call, tool
from loopwarden.models import offered_tool_names
from loopwarden.models.scripted import ReplyLike
from loopwarden.tools.search import SEARCH_TOOL, ToolIndex, ToolSearch

AREAS = {
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
VERBS = ["get", "list", "create", "update", "delete", "export", "archive", "search", "count", "sync"]


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    for area, things in AREAS.items():
        for verb in VERBS:
            for variant in (1, 2):

                def fn(query: str = "", limit: int = 10) -> dict[str, Any]:
                    return {"ok": True}

                description = f"{verb.capitalize()} {things} records in the {area} system (variant {variant})."
                reg.add(tool(name=f"{verb}_{things.split()[0]}_{variant}", namespace=area, description=description)(fn))
    return reg


def schema_chars(request: ModelRequest) -> int:
    return len(json.dumps(request.tools))


async def measure(agent_tools: ToolRegistry, search: ToolSearch | None, target: str) -> list[int]:
    def reply(request: ModelRequest) -> ReplyLike:
        if sum(m["role"] == "tool" for m in request.messages) >= 2:  # searched, then used it
            return "Three invoices are overdue."
        if target in offered_tool_names(request):
            return call(target, {"query": "overdue"})
        return call(SEARCH_TOOL, {"query": "list overdue invoice payments"})

    model = FunctionModel(reply)
    await Agent(model, agent_tools, tool_search=search).run("Which invoices are overdue?")
    return [schema_chars(r) for r in model.requests]


def main() -> None:
    full = registry()
    started = time.perf_counter()
    full_chars = len(json.dumps(full.openai_tools()))
    serialise_s = time.perf_counter() - started

    searched = registry()
    per_turn = asyncio.run(measure(searched, ToolSearch(limit=5, max_discovered=6), "billing__list_invoice_1"))

    index = ToolIndex(full)
    started = time.perf_counter()
    rounds = 50
    for _ in range(rounds):
        index.search("list overdue invoice payments", 5)
    search_s = (time.perf_counter() - started) / rounds

    print(f"registry: {len(full)} tools")
    print(f"baseline, full registry offered every turn: {full_chars} chars of tool schema per model call")
    for turn, chars in enumerate(per_turn, 1):
        print(f"tool search, turn {turn}: {chars} chars ({chars / full_chars:.3f} x baseline)")
    print(f"one BM25 search: {search_s / serialise_s:.4f} x the time to serialise the full registry once")


if __name__ == "__main__":
    main()
