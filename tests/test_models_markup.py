"""Tool-call markup leaked into reply text (DeepSeek DSML and the older V3 tokens)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models.markup import _DSML_TAG, find_leaked_calls, find_markup, has_markup, strip_template_tokens

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


# -- the formats real chat templates emit ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ('functions.read_file:\n{"path": "a.txt"}', "read_file", {"path": "a.txt"}),
        ('I will read it.\nfunctions.read_file:\n{"path": "a.txt"}\n', "read_file", {"path": "a.txt"}),
        ('<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>', "read_file",
         {"path": "a.txt"}),
        ('<function=read_file>{"path": "a.txt"}</function>', "read_file", {"path": "a.txt"}),
        ('{"name": "read_file", "arguments": {"path": "a.txt"}}', "read_file", {"path": "a.txt"}),
        ('```json\n{"name": "read_file", "parameters": {"path": "a.txt"}}\n```', "read_file", {"path": "a.txt"}),
        ('{"tool_calls": [{"function": {"name": "read_file", "arguments": "{\\"path\\": \\"a.txt\\"}"}}]}',
         "read_file", {"path": "a.txt"}),
        ('functions.read_file:\n{"path": "notes\nREADME.md"}<|im_end|>', "read_file", {"path": "notes\nREADME.md"}),
    ],
)  # fmt: skip
def test_calls_in_the_formats_of_real_chat_templates_are_recovered(text: str, name: str, arguments: dict) -> None:
    leaked = find_leaked_calls(text)
    assert leaked is not None and not leaked.unreadable
    [call] = leaked.calls
    assert call.name == name and json.loads(call.arguments) == arguments
    assert leaked.text is None or ("functions." not in leaked.text and "<|im_end|>" not in leaked.text)


@pytest.mark.parametrize(
    "text",
    [
        '<|python_tag|>{"name": "read_file", "parameters": {"path": "a"}}',
        '[TOOL_CALLS] [{"name": "read_file", "arguments": {"path": "a"}}]',
        '```tool_code\nprint(read_file(path="a.txt"))\n```',
        "<｜tool▁calls▁begin｜>",
    ],
)
def test_other_template_formats_are_detected(text: str) -> None:
    assert find_markup(f"Here you go. {text}") is not None


@pytest.mark.parametrize(
    "text",
    [
        "The functions of the probe: field and temperature.",
        "We call functions.read_file in the code: that is a method, not a call.",
        'The API returns "tool_calls": [] when no tool is called.',
        "Use <invoke name=x> in XML; | and ｜ are bars.",
        '```python\nresult = {"name": "B", "value": 1}\n```',
    ],
)
def test_prose_about_tools_is_not_markup(text: str) -> None:
    assert find_markup(text) is None


def test_chat_template_tokens_are_stripped_from_text() -> None:
    assert strip_template_tokens("The peak is 12.4 mT.<|im_end|>") == "The peak is 12.4 mT."
    assert strip_template_tokens("<start_of_turn>model\nHi<end_of_turn>") == "model\nHi"
    assert strip_template_tokens("<|im_end|>") is None


def test_one_detector_serves_the_verifier_the_draft_check_and_the_eval() -> None:
    from loopwarden.eval.verifiers import no_markup
    from loopwarden.report.write.draft import leak_problem
    from loopwarden.verify import no_tool_markup

    leak = 'functions.read_file:\n{"path": "a.txt"}'
    assert all(check(leak) is not None for check in (no_markup, leak_problem, no_tool_markup))
    prose = "Field rose from 0.1 to 12.4 mT across the scan."
    assert all(check(prose) is None for check in (no_markup, leak_problem, no_tool_markup))
