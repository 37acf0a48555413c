"""Tool-call markup leaked into reply text (DeepSeek DSML and the older V3 tokens)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models.markup import _DSML_TAG, find_leaked_calls, has_markup

DSML = (
    "Let me read both files.\n"
    "<｜DSML｜function_calls>\n"
    '<｜DSML｜invoke name="read_file">\n'
    '<｜DSML｜parameter name="path" string="true">a.txt</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="limit" string="false">15</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    '<｜DSML｜invoke name="read_file">\n'
    '<｜DSML｜parameter name="path" string="true">b.txt</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    "</｜DSML｜function_calls>"
)

LEGACY = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)


def test_dsml_parallel_calls_are_recovered_with_typed_parameters() -> None:
    leaked = find_leaked_calls(DSML)
    assert leaked is not None
    assert [c.name for c in leaked.calls] == ["read_file", "read_file"]
    assert json.loads(leaked.calls[0].arguments) == {"path": "a.txt", "limit": 15}
    assert json.loads(leaked.calls[1].arguments) == {"path": "b.txt"}
    assert leaked.text == "Let me read both files."
    assert not leaked.unreadable


def test_ascii_bars_and_tool_calls_block_name() -> None:
    text = '<|DSML|tool_calls><|DSML|invoke name="ls"></|DSML|invoke></|DSML|tool_calls>'
    leaked = find_leaked_calls(text)
    assert leaked is not None and [c.name for c in leaked.calls] == ["ls"]
    assert json.loads(leaked.calls[0].arguments) == {}
    assert leaked.text is None


def test_unterminated_invoke_still_yields_its_call() -> None:
    text = (
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="grep">\n'
        '<｜DSML｜parameter name="q" string="true">x</｜DSML｜parameter>'
    )
    leaked = find_leaked_calls(text)
    assert leaked is not None and [c.name for c in leaked.calls] == ["grep"]
    assert json.loads(leaked.calls[0].arguments) == {"q": "x"}


def test_legacy_v3_tokens_are_recovered() -> None:
    leaked = find_leaked_calls(LEGACY)
    assert leaked is not None
    assert [(c.name, json.loads(c.arguments)) for c in leaked.calls] == [("get_weather", {"city": "Paris"})]
    assert leaked.text is None


def test_markup_without_a_readable_call_is_flagged() -> None:
    leaked = find_leaked_calls("Sure. <｜DSML｜function_calls> oops")
    assert leaked is not None and leaked.unreadable and leaked.calls == []
    assert leaked.text is not None and "DSML" not in leaked.text


def test_plain_text_and_talk_about_xml_are_not_markup() -> None:
    assert find_leaked_calls("Use <invoke name=x> in your XML, and a | b | c tables.") is None
    assert not has_markup(None)


@given(st.text())
def test_any_text_is_handled_without_error(text: str) -> None:
    leaked = find_leaked_calls(text)
    if leaked is not None:
        # whatever is left for the reader carries no complete markup tag
        assert leaked.text is None or _DSML_TAG.search(leaked.text) is None
        assert all(isinstance(c.arguments, str) and c.arguments for c in leaked.calls)


@given(st.text(max_size=30), st.text(max_size=30))
def test_markup_inside_any_text_is_found(before: str, after: str) -> None:
    leaked = find_leaked_calls(before + DSML + after)
    assert leaked is not None
    assert len(leaked.calls) >= 2


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_string_parameters_round_trip(value: str) -> None:
    value = value.replace("<", "")  # a literal '<｜DSML｜' inside a value is not representable
    text = (
        f'<｜DSML｜invoke name="t"><｜DSML｜parameter name="v" string="true">{value}'
        "</｜DSML｜parameter></｜DSML｜invoke>"
    )
    leaked = find_leaked_calls(text)
    assert leaked is not None
    assert json.loads(leaked.calls[0].arguments) == {"v": value}
