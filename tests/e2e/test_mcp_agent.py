"""An Agent running on a real MCP server's tools, end to end with a scripted model: a task done over
stdio and over HTTP, 200 tools offered through tool search (each one found and called), a server
dying mid-run (stdio and HTTP), one turn's calls at once over one connection, a loop over an MCP
tool stopped by the ladder, a destructive tool pausing for approval, and a tool whose own name
holds the wire separator `__`.

Tests that only call tools which leave the server as it was share one server of each kind (stdio,
HTTP, the 200-tool catalogue) for the module: each start was a new Python importing the MCP SDK
(about 1.3 s of CPU; tests/mcpkit.py forks them now), and 12 starts were most of this module's
CPU. A server that dies in its test is its own. The module's tests run on one event loop, so the
shared connections stay on theirs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio

from loopwarden import Agent, ConfigError, LoopConfig, ScriptedModel, Tool, ToolSearch, call, tool
from loopwarden.events import ToolCallFinished
from loopwarden.models.base import ModelRequest
from loopwarden.models.scripted import FunctionModel, ReplyLike, offered_tool_names
from loopwarden.tools.mcp import MCPTools
from loopwarden.tools.mcp_results import SERVER_GONE
from mcpkit import toolbox, toolbox_http, watchdog

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.usefixtures(watchdog.__name__),
    pytest.mark.asyncio(loop_scope="module"),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stdio_toolbox() -> AsyncIterator[MCPTools]:
    """The toolbox over stdio, open for the module's tests (tests/shared_setup.py keeps them on one worker)."""
    async with toolbox() as server:
        yield server


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The URL of one toolbox process over streamable HTTP for the module; each test opens its own connection."""
    with toolbox_http() as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def catalogue_toolbox() -> AsyncIterator[MCPTools]:
    """The toolbox with 200 generated catalogue tools (209 in all) over stdio, for the module."""
    async with toolbox("--many", "200") as server:
        assert len(server.tools) == 209
        yield server


def finished(events: list[object]) -> list[ToolCallFinished]:
    return [e for e in events if isinstance(e, ToolCallFinished)]


async def test_an_agent_run_over_stdio_uses_the_servers_tools(stdio_toolbox: MCPTools) -> None:
    server = stdio_toolbox
    model = ScriptedModel([call("toolbox__get_weather", {"city": "Oslo"}), "11.5 degrees in Oslo."])
    result = await Agent(model, server.tools).run("Weather in Oslo?")
    assert result.status == "completed" and result.output == "11.5 degrees in Oslo."
    (done,) = finished(result.events)
    assert done.ok and result.totals.tool_executions == 1
    assert "toolbox__get_weather" in offered_tool_names(model.requests[0])
    tool_message = next(m for m in result.messages if m.get("role") == "tool")
    assert "light rain" in str(tool_message["content"])


async def test_an_agent_run_over_streamable_http(http_url: str) -> None:
    async with MCPTools.http(http_url) as server:
        model = ScriptedModel([call("toolbox__set_flag", {"name": "dry_run", "value": True}), "Flag set."])
        result = await Agent(model, server.tools).run("Set dry_run.")
    assert result.status == "completed" and [e.ok for e in finished(result.events)] == [True]


async def test_a_name_holding_the_wire_separator_is_offered_and_called(stdio_toolbox: MCPTools) -> None:
    model = ScriptedModel([call("toolbox__fs__read", {"path": "notes.txt"}), "read it"])
    agent = Agent(model, stdio_toolbox.tools)
    result = await agent.run("Read notes.txt")
    assert "toolbox__fs__read" in offered_tool_names(model.requests[0])
    (done,) = finished(result.events)
    assert done.ok and done.tool == "toolbox__fs__read" and "contents of notes.txt" in (done.preview or "")


async def test_two_hundred_tools_reach_the_model_through_tool_search(catalogue_toolbox: MCPTools) -> None:
    @tool
    def note(text: str) -> str:
        """Keep a note for the user."""
        return text

    server = catalogue_toolbox
    assert len(server.tools) == 209

    def reply(request: ModelRequest) -> ReplyLike:
        names = offered_tool_names(request)
        if len(model.requests) == 1:
            return call("search_tools", {"query": "export invoice records"})
        wanted = next((n for n in names if n.startswith("toolbox__export_invoice")), None)
        if wanted is not None and len(model.requests) == 2:
            return call(wanted, {"query": "2026"})
        return "exported"

    model = FunctionModel(reply)
    agent = Agent(model, [server, note])  # more than 20 server tools: behind tool search by itself
    result = await agent.run("Export the invoices")
    search = agent.tool_search
    assert search is not None and search.always == ("note",)
    first, second = (offered_tool_names(r) for r in model.requests[:2])
    assert first == ["note", "search_tools"]  # the agent's own tool, and the search: not 209 schemas
    assert len(second) <= 2 + search.max_discovered and any(n.startswith("toolbox__export_invoice") for n in second)
    assert result.status == "completed" and [e.ok for e in finished(result.events)] == [True, True]


async def test_any_of_the_two_hundred_tools_can_be_searched_for_and_called(catalogue_toolbox: MCPTools) -> None:
    """Each catalogue tool in turn: the model searches for what it does, is offered a bounded list
    holding it, calls it, and the server answers."""
    server = catalogue_toolbox
    catalogue = [t for t in server.tools if t.name.rsplit("_", 1)[-1].isdigit()]
    assert len(catalogue) == 200
    missed: list[str] = []
    largest_offer = 0
    for target in catalogue:

        def reply(request: ModelRequest, target: Tool = target) -> ReplyLike:
            results = sum(m.get("role") == "tool" for m in request.messages)
            if results == 0:
                return call("search_tools", {"query": target.description})
            if results == 1 and target.wire_name in offered_tool_names(request):
                return call(target.wire_name, {"query": "q"})
            return "done"

        model = FunctionModel(reply)
        result = await Agent(model, [server]).run(f"use {target.name}")
        largest_offer = max(largest_offer, *(len(r.tools) for r in model.requests))
        calls = [e for e in finished(result.events) if e.tool == target.wire_name]
        if not (calls and calls[0].ok and f"{target.name}: 0 records" in (calls[0].preview or "")):
            missed.append(target.name)
    assert missed == []
    assert largest_offer <= 1 + ToolSearch().max_discovered  # search_tools and what it found, never 209


async def test_a_few_server_tools_are_offered_as_they_are_and_an_unopened_server_is_refused(
    stdio_toolbox: MCPTools,
) -> None:
    server = stdio_toolbox
    model = ScriptedModel([call("toolbox__get_weather", {"city": "Oslo"}), "rain"])
    agent = Agent(model, [server])
    result = await agent.run("Weather in Oslo?")
    assert agent.tool_search is None and len(offered_tool_names(model.requests[0])) == len(server.tools)
    assert result.status == "completed"
    with pytest.raises(ConfigError, match="not open"):
        Agent(ScriptedModel(["-"]), [toolbox()])


@asynccontextmanager
async def opened(transport: str, **options: Any) -> AsyncIterator[MCPTools]:
    """The toolbox server, open, over stdio or over streamable HTTP on 127.0.0.1."""
    if transport == "stdio":
        async with toolbox(**options) as server:
            yield server
        return
    with toolbox_http() as url:
        async with MCPTools.http(url, **options) as server:
            yield server


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_dying_mid_run_gives_the_model_a_clear_error_and_the_run_ends_cleanly(transport: str) -> None:
    async with opened(transport, timeout=3600.0) as server:  # only seeing the server go can end the call
        model = ScriptedModel(
            [call("toolbox__crash"), call("toolbox__get_weather", {"city": "Oslo"}), "The weather service is down."]
        )
        result = await Agent(model, [server]).run("Weather in Oslo?")
    assert result.status == "completed" and result.output == "The weather service is down."
    crashed, after = finished(result.events)
    assert (crashed.ok, crashed.error_type, after.error_type) == (False, SERVER_GONE, SERVER_GONE)
    assert result.totals.tool_executions == 2  # not retried: the server is gone


@asynccontextmanager
async def shared(transport: str, request: pytest.FixtureRequest) -> AsyncIterator[MCPTools]:
    """The module's toolbox over stdio, or a connection of this test's own to its HTTP one."""
    if transport == "stdio":
        yield request.getfixturevalue(stdio_toolbox.__name__)
        return
    async with MCPTools.http(request.getfixturevalue(http_url.__name__)) as server:
        yield server


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_calls_of_one_turn_run_at_once_over_one_connection(
    transport: str, request: pytest.FixtureRequest
) -> None:
    async with shared(transport, request) as server:
        cities = ["Oslo", "Rome", "Lima"]
        model = ScriptedModel([[call("toolbox__get_weather", {"city": c}) for c in cities], "Rain everywhere."])
        result = await Agent(model, [server]).run("Weather in Oslo, Rome and Lima?")
    done = finished(result.events)
    assert [d.ok for d in done] == [True] * 3 and result.totals.tool_executions == 3
    assert [c in (d.preview or "") for c, d in zip(cities, done, strict=True)] == [True] * 3  # in proposal order


async def test_a_loop_over_an_mcp_tool_is_stopped_by_the_ladder(stdio_toolbox: MCPTools) -> None:
    def reply(request: ModelRequest) -> ReplyLike:
        if not request.tools:  # degrade: the phase ended, answer from what was gathered
            return "It is 11.5 degrees in Oslo."
        return call("toolbox__get_weather", {"city": "Oslo"})

    model = FunctionModel(reply)
    result = await Agent(model, stdio_toolbox.tools, config=LoopConfig(policy="degrade")).run("Weather in Oslo?")
    assert result.stop_reason == "repeated_call" and result.status == "degraded"
    assert result.totals.tool_executions == 1  # the repeats were answered from the first result
    assert model.calls <= 7


async def test_a_destructive_tool_pauses_the_run_for_approval(stdio_toolbox: MCPTools) -> None:
    model = ScriptedModel([call("toolbox__delete_file", {"path": "data.csv"}), "deleted"])
    result = await Agent(model, stdio_toolbox.tools).run("Delete data.csv")
    assert result.status == "paused" and result.stop_reason == "approval_required"
    assert finished(result.events) == []
