"""Tools declared by a JSON Schema (MCP servers, proxied clients): the schema is shown as given,
arguments are checked against it, and the function gets them as keywords."""

from __future__ import annotations

from typing import Any

import pytest

from loopwarden import Agent, ScriptedModel, call
from loopwarden.executor import validate_arguments
from loopwarden.tools import ToolResult
from loopwarden.tools.schema import tool_from_schema

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
    "required": ["path"],
    "additionalProperties": False,
}


def test_the_schema_is_shown_exactly_as_given() -> None:
    t = tool_from_schema("read", SCHEMA, lambda **kw: kw, description="Read")
    assert t.openai_schema()["function"]["parameters"] == SCHEMA


@pytest.mark.parametrize(
    "arguments, problem",
    [({"limit": 3}, "'path' is a required property"), ({"path": "a", "limit": 0}, "limit"), ({"path": 1}, "path")],
)
def test_arguments_that_break_the_schema_are_refused_with_the_reason(arguments: dict[str, Any], problem: str) -> None:
    result = validate_arguments(tool_from_schema("read", SCHEMA, lambda **kw: kw), arguments)
    assert isinstance(result, ToolResult) and result.error_type == "invalid_arguments"
    assert problem in (result.message or "")


async def test_sync_and_async_functions_get_the_arguments_as_keywords() -> None:
    async def async_read(**kwargs: Any) -> str:
        return f"async {kwargs['path']}"

    for fn, expected in ((lambda **kw: f"sync {kw['path']}", "sync a"), (async_read, "async a")):
        t = tool_from_schema("read", SCHEMA, fn)
        validated = validate_arguments(t, {"path": "a"})
        assert not isinstance(validated, ToolResult)
        assert await t.call(validated) == expected


def test_a_broken_schema_still_lets_the_tool_run() -> None:
    t = tool_from_schema("odd", {"type": "object", "properties": {"x": {"type": "no-such-type"}}}, lambda **kw: "ran")
    model = ScriptedModel([call("odd", {"x": 1}), "done"])
    result = Agent(model, [t]).run_sync("go")
    assert result.output == "done"
    assert next(e for e in result.events if e.type == "tool_call_finished").ok  # type: ignore[attr-defined]


def test_the_guard_sees_and_reports_the_arguments_as_sent_not_wrapped() -> None:
    """The one field that carries a schema tool's arguments is invisible to the guard: approvals
    show the object the model sent, and the no-progress detector reads its fields (paging through
    a file is an enumeration, not a loop)."""
    from loopwarden.events import ApprovalRequired, GuardVerdict

    remove = tool_from_schema("remove", SCHEMA, lambda **kw: "gone", requires_approval=True)
    paused = Agent(ScriptedModel([call("remove", {"path": "a.txt"})]), [remove]).run_sync("remove a.txt")
    (asked,) = [e for e in paused.events if isinstance(e, ApprovalRequired)]
    assert asked.arguments == {"path": "a.txt"}

    page = tool_from_schema("page", SCHEMA, lambda **kw: "", description="Read a page of a file")
    pages = [call("page", {"path": "big.txt", "limit": n}) for n in range(1, 7)]
    result = Agent(ScriptedModel([*pages, "done"]), [page]).run_sync("read big.txt")
    steps = [e.detector for e in result.events if isinstance(e, GuardVerdict) and e.action != "allowed"]
    assert result.status == "completed" and steps == []
