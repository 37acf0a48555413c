"""MCPTools against real MCP server processes (tests/mcp_servers/toolbox.py, the SDK's own server):
listing, schemas, annotations, isError and protocol errors, timeouts, a server that dies mid-call,
stdio and streamable HTTP, the sync entry.

The tests that only list and call tools which leave the server as it was share one stdio server
(`plain_toolbox`, held through the sync entry on a loop of its own, so each test's loop calls it
from outside): each start is a process of its own (forked by tests/mcpkit.py's zygote, a few ms of
CPU; it was a new Python importing the MCP SDK, about 1.3 s)."""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwarden import RetryPolicy, ToolRegistry, ToolResult
from loopwarden.executor import Executor, validate_arguments
from loopwarden.tools.mcp import MCPConnectionError, MCPTools, namespace_of, python_server
from loopwarden.tools.mcp_results import SERVER_GONE
from mcpkit import TOOLBOX, gone_within, silent_listener, silent_stdio, toolbox, toolbox_http, watchdog

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.usefixtures(watchdog.__name__)]


@pytest.fixture(scope="module")
def plain_toolbox() -> Iterator[MCPTools]:
    """The toolbox over stdio with the default options, open for the module (tests/shared_setup.py MCP_GROUP)."""
    with toolbox() as server:
        yield server


async def test_stdio_lists_the_tools_under_the_servers_namespace_with_their_schemas(plain_toolbox: MCPTools) -> None:
    server = plain_toolbox
    by_name = {t.name: t for t in server.tools}
    assert server.namespace == "toolbox"
    assert {"get_weather", "delete_file", "set_flag", "refuse", "fs__read", "crash", "stall"} <= set(by_name)
    weather = by_name["get_weather"]
    assert weather.qualified_name == "toolbox.get_weather" and weather.wire_name == "toolbox__get_weather"
    assert weather.description == "The current weather of a city."
    assert weather.parameters == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    result = await server.call("get_weather", {"city": "Oslo"})
    assert result.ok and result.data == {"result": "Oslo: 11.5 degrees, light rain"}


async def test_annotations_map_onto_side_effect_idempotent_and_approval_only_where_given(
    plain_toolbox: MCPTools,
) -> None:
    server = plain_toolbox
    flags = {t.name: (t.side_effect, t.idempotent, t.requires_approval, t.repeatable) for t in server.tools}
    assert flags["get_weather"] == ("read", True, False, False)  # readOnlyHint, idempotentHint
    assert flags["delete_file"] == ("write", False, True, False)  # destructiveHint: the approval gate decides
    assert flags["set_flag"] == ("write", True, False, False)  # destructiveHint false, idempotentHint true
    assert flags["refuse"] == ("write", False, False, False)  # no annotations: the spec's defaults, no approval
    assert server.annotations["delete_file"].destructive_hint is True


async def test_overrides_make_a_tool_repeatable_or_terminal_and_approval_can_be_left_to_the_user() -> None:
    async with toolbox(repeatable=["stall"], terminal=["set_flag"], approve_destructive=False) as server:
        flags = {t.name: (t.repeatable, t.terminal, t.requires_approval) for t in server.tools}
    assert flags["stall"] == (True, False, False)
    assert flags["set_flag"] == (False, True, False)
    assert flags["delete_file"] == (False, False, False)


async def test_is_error_results_and_protocol_errors_are_structured_failures(plain_toolbox: MCPTools) -> None:
    server = plain_toolbox
    refused = await server.call("refuse", {"reason": "quota exceeded"})
    assert not refused.ok and refused.error_type == "tool_error" and not refused.retryable
    assert "quota exceeded" in (refused.message or "")
    unknown = await server.call("no_such_tool", {})
    assert not unknown.ok and "no_such_tool" in (unknown.message or "")
    wrong = await server.call("get_weather", {"city": 3})  # past the local schema check: the server's
    assert not wrong.ok and "city" in (wrong.message or "")
    assert (await server.call("get_weather", {"city": "Rome"})).ok  # the server is still fine


async def test_a_write_without_idempotent_hint_that_times_out_is_run_once_by_the_executor() -> None:
    async with toolbox(timeout=1.0) as server:
        append = {t.name: t for t in server.tools}["append_entry"]
        assert append.side_effect == "write" and not append.idempotent
        executor = Executor(retry=RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0))
        validated = validate_arguments(append, {"entry": "pump", "seconds": 600})
        assert not isinstance(validated, ToolResult)
        late = await executor.run(append, validated)  # the watchdog ends the test if the limit fails
        assert late.attempts == 1 and late.result.error_type == "timeout" and late.result.retryable
        assert "not retried automatically" in (late.result.message or "")
        assert (await server.call("append_entry", {"entry": "valve"})).data == {"result": 2}  # pump went in once


async def test_a_call_past_the_timeout_is_a_retryable_timeout_and_the_server_goes_on() -> None:
    async with toolbox(timeout=1.0) as server:
        late = await server.call("stall", {"seconds": 600})  # the watchdog ends the test if the limit fails
        assert not late.ok and late.error_type == "timeout" and late.retryable
        assert "did not answer toolbox.stall in time" in (late.message or "")  # the SDK's limit, not the executor's
        assert (await server.call("get_weather", {"city": "Oslo"})).ok


async def test_a_server_that_dies_mid_call_gives_a_clear_error_at_once_not_a_hang() -> None:
    server = await toolbox(timeout=3600.0).open()  # only the closed pipe can end the call before the watchdog
    died = await server.call("crash", {})
    after = await server.call("get_weather", {"city": "Oslo"})
    for result in (died, after):
        assert not result.ok and result.error_type == SERVER_GONE and not result.retryable
        assert "toolbox" in (result.message or "") and result.user_action
    assert not server.connected
    await server.aclose()


async def test_streamable_http_lists_calls_and_sees_the_server_die() -> None:
    with toolbox_http() as url:
        async with MCPTools.http(url, timeout=60.0) as server:
            assert "get_weather" in {t.name for t in server.tools}
            assert (await server.call("get_weather", {"city": "Oslo"})).data == {
                "result": "Oslo: 11.5 degrees, light rain"
            }
            refused = await server.call("refuse", {"reason": "no"})
            assert refused.error_type == "tool_error"
            died = await server.call("crash", {})
            assert died.error_type == SERVER_GONE
            assert (await server.call("get_weather", {"city": "Oslo"})).error_type == SERVER_GONE


def test_the_sync_entry_holds_the_connection_on_its_own_loop() -> None:
    # Started by `python_server`, as a user starts a Python server (a new interpreter, not the zygote's
    # fork): the public helper's one end-to-end use in the suite.
    with python_server(TOOLBOX, "stdio") as server:
        # each asyncio.run is a new loop (as agent.run_sync makes one): calls cross to the connection's
        first = asyncio.run(server.call("get_weather", {"city": "Oslo"}))
        second = asyncio.run(server.call("get_weather", {"city": "Rome"}))
    assert first.ok and second.ok and "Rome" in str(second.data)
    assert not server.connected


async def test_a_stdio_server_starts_when_this_process_has_no_real_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # as in a notebook, or under output capture
    async with toolbox() as server:
        assert (await server.call("get_weather", {"city": "Oslo"})).ok


async def test_a_server_that_exits_at_start_is_a_connection_error_at_once() -> None:
    exits = MCPTools.stdio(sys.executable, ["-c", "import sys; sys.exit(1)"], timeout=3600.0, connect_timeout=3600.0)
    with pytest.raises(MCPConnectionError, match="failed to start"):  # the closed pipe, not a limit, ends it
        await exits.open()


async def test_a_server_that_cannot_start_raises_a_connection_error() -> None:
    with pytest.raises(MCPConnectionError):
        await MCPTools.stdio("/nonexistent/mcp-server", connect_timeout=30).open()


async def test_a_stdio_server_that_never_answers_is_given_up_after_connect_timeout_and_stopped(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    silent = silent_stdio(pid_file, timeout=3600.0, connect_timeout=2.0)  # only the start's own limit can end it
    with pytest.raises(MCPConnectionError, match="did not answer within 2 s"):
        await silent.open()
    assert gone_within(int(pid_file.read_text()))  # the SDK stopped the process before open() returned
    assert not silent.connected
    assert (await silent.call("anything", {})).error_type == SERVER_GONE
    await silent.aclose()  # closing again is harmless


async def test_an_http_server_that_never_answers_is_given_up_after_connect_timeout() -> None:
    with silent_listener() as url, pytest.raises(MCPConnectionError, match="did not answer within 2 s"):
        await MCPTools.http(url, timeout=3600.0, connect_timeout=2.0).open()


async def test_nothing_listening_on_the_port_is_a_connection_error() -> None:
    with silent_listener() as url:
        pass  # the port is closed again: connections are refused
    with pytest.raises(MCPConnectionError, match="failed to start"):
        await MCPTools.http(url, connect_timeout=60.0).open()


async def test_two_hundred_tools_are_listed_and_offered_behind_tool_search() -> None:
    async with toolbox("--many", "200") as server:
        assert len(server.tools) == 209
        search = server.tool_search()
        assert search is not None
        registry = ToolRegistry(server.tools)
        found = search.build_tool(registry)
        assert server.tool_search(many=500) is None
    assert found.qualified_name == "search_tools"


def test_namespace_of_a_server_name_is_a_wire_safe_name() -> None:
    assert namespace_of("my server.v2") == "my_server_v2"
    assert namespace_of("a__b") == "a_b"  # no separator inside a namespace
    assert namespace_of("***") == "mcp"
