"""`tool()` passes its options on in one tuple (no closure made per call): every option must reach
the declared Tool under its own name, bare and as a decorator alike."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from loopwarden import ToolResult, tool
from loopwarden.tools import Tool, business_failure


def _parser(data: Any) -> ToolResult | None:
    return None


def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url: where
    """
    return url


# Every option of tool() but `name` and `namespace` (checked by the names below), a value unlike its default.
OPTIONS: dict[str, Any] = {
    "description": "Fetch it.",
    "terminal": True,
    "repeatable": True,
    "side_effect": "write",
    "idempotent": True,
    "result_parser": _parser,
    "timeout": 2.5,
    "roles": ["admin"],
    "requires_approval": True,
    "blocking": True,
    "rerun_on_recovery": True,
}


def test_the_options_cover_every_keyword_of_tool() -> None:
    keywords = [p.name for p in inspect.signature(tool).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert sorted(keywords) == sorted([*OPTIONS, "name", "namespace"])
    assert all(inspect.signature(tool).parameters[k].default != v for k, v in OPTIONS.items())


def test_every_option_reaches_the_tool_under_its_own_name() -> None:
    defaults = tool(fetch)
    for option, value in OPTIONS.items():  # one at a time: two options swapped would show
        declared = tool(name="get", namespace="web", **{option: value})(fetch)
        assert (declared.name, declared.namespace, declared.qualified_name) == ("get", "web", "web.get")
        for other in OPTIONS:
            expected = getattr(defaults, other) if other != option else frozenset(value) if other == "roles" else value
            assert getattr(declared, other) == expected, (option, other)


def test_bare_and_decorated_with_defaults_are_one_tool() -> None:
    bare, decorated = tool(fetch), tool()(fetch)
    assert bare == decorated
    assert (bare.name, bare.description, bare.side_effect, bare.result_parser) == (
        "fetch",
        "Fetch a page.",
        "read",
        business_failure,
    )
    assert bare.pace is decorated.pace  # one function, one name: one pace


def test_the_tool_is_the_one_its_fields_by_name_make() -> None:
    # tool() builds the Tool by position (cheaper than 17 keywords): the same instance as by name.
    declared = tool(name="get", namespace="web", **OPTIONS)(fetch)
    by_name = {**OPTIONS, "roles": frozenset(OPTIONS["roles"])}
    expected = Tool(name="get", namespace="web", fn=fetch, args_model=declared.args_model, is_async=False,
                    context_arg=None, **by_name)  # fmt: skip
    assert declared == expected
    assert [getattr(declared, f.name) for f in dataclasses.fields(Tool)] == [
        getattr(expected, f.name) for f in dataclasses.fields(Tool)
    ]
