"""Wire names round-trip: a tool name may hold `__` (the wire form of the namespace dot) itself, as
MCP tool names may; it is still found, offered and called by its wire name."""

from __future__ import annotations

import pytest

from loopwarden import Agent, ScriptedModel, ToolDefinitionError, ToolRegistry, call, tool


@tool(name="fs__read", namespace="files")
def fs_read(path: str) -> str:
    return f"contents of {path}"


@tool(name="plain__name")
def plain(x: int) -> int:
    return x


def test_a_name_with_the_separator_is_found_by_qualified_and_wire_name() -> None:
    registry = ToolRegistry([fs_read, plain])
    assert registry.get("files__fs__read") is fs_read and registry.get("files.fs__read") is fs_read
    assert registry.get("plain__name") is plain
    offered = registry.openai_tools(["files__fs__read", "plain__name"])
    assert [t["function"]["name"] for t in offered] == ["files__fs__read", "plain__name"]


def test_two_tools_with_one_wire_name_are_refused_at_registration() -> None:
    other = tool(name="read", namespace="files__fs")(lambda path: path)  # files.fs__read vs files__fs.read
    with pytest.raises(ToolDefinitionError, match="one wire name"):
        ToolRegistry([fs_read, other])


def test_an_agent_offers_and_runs_the_tool_named_with_the_separator() -> None:
    model = ScriptedModel([call("files__fs__read", {"path": "a.txt"}), "done"])
    result = Agent(model, [fs_read]).run_sync("read a.txt")
    assert result.totals.tool_executions == 1
    assert model.requests[0].tools[0]["function"]["name"] == "files__fs__read"
