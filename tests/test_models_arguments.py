"""Lenient reading of a model's tool-call arguments, and the record of what was repaired."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from loopwarden.models.arguments import parse_arguments


@pytest.mark.parametrize(
    ("raw", "value", "repair"),
    [
        ('{"path": "a.txt"}', {"path": "a.txt"}, None),
        ("", {}, None),
        ('{"code": "x = 1\n\ty = 2"}', {"code": "x = 1\n\ty = 2"}, "control characters"),
        ('{"path": "a.txt"} and then I will read b', {"path": "a.txt"}, "text after the JSON"),
        ('{"path": "a.txt"}<|im_end|>', {"path": "a.txt"}, "chat-template tokens"),
        ('<|im_start|>{"path": "a.txt"}<end_of_turn>', {"path": "a.txt"}, "chat-template tokens"),
        ('```json\n{"path": "a.txt"}\n```', {"path": "a.txt"}, "code fence"),
        ('"{\\"path\\": \\"a.txt\\"}"', {"path": "a.txt"}, "encoded twice"),
        ('Arguments: {"limit": 5}', {"limit": 5}, "text before the JSON"),
    ],
)
def test_damage_with_a_clear_meaning_is_repaired_and_named(raw: str, value: Any, repair: str | None) -> None:
    parsed = parse_arguments(raw)
    assert parsed.error is None and parsed.value == value
    if repair is None:
        assert parsed.repair is None
    else:
        assert parsed.repair is not None and repair in parsed.repair


@pytest.mark.parametrize("raw", ['{"path": ', "read the file please", '{"a": [1, 2}'])
def test_text_with_no_json_in_it_stays_an_error(raw: str) -> None:
    parsed = parse_arguments(raw)
    assert parsed.error is not None and parsed.value == raw


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


_ESCAPE = re.compile(r"\\\\|\\n|\\t")


def _raw_control_characters(dumped: str) -> str:
    """`\\n` and `\\t` escapes written as the raw characters, read left to right so an escaped
    backslash stays one (a plain replace would undo the `\\t` inside `\\\\t`, a backslash then a t)."""
    return _ESCAPE.sub(lambda m: {"\\n": "\n", "\\t": "\t"}.get(m.group(0), m.group(0)), dumped)


def test_the_raw_form_undoes_only_newline_and_tab_escapes() -> None:
    dumped = json.dumps({"a": "x\ny\tz", "b": "\\t\\n", "c": "\\\n"})
    assert _raw_control_characters(dumped) == '{"a": "x\ny\tz", "b": "\\\\t\\\\n", "c": "\\\\\n"}'


@given(st.dictionaries(st.text(min_size=1, max_size=8), _texts, max_size=4), st.sampled_from(["", "\n", "<|im_end|>"]))
@example({"0": "\\t"}, "")  # a backslash then a t: found by hypothesis in CI
@example({"a": "\\\n\t"}, "\n")
def test_raw_control_characters_never_change_the_meaning(arguments: dict[str, str], tail: str) -> None:
    # What a small model writes: the JSON with the string escapes undone for newlines and tabs.
    raw = _raw_control_characters(json.dumps(arguments, ensure_ascii=False)) + tail
    parsed = parse_arguments(raw)
    assert parsed.error is None and parsed.value == arguments
