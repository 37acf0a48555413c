"""fastjson: the standard library's output, byte for byte, and its errors."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest

from loopwarden.hotpath.fastjson import encoder, loads

VALUES: list[Any] = [
    {"path": "a.txt", "offset": 0},
    {"b": [1, 2.5, None, True], "a": {"z": 'é ✓ \u2028 \x00 "q" \\'}, "": -0.0},
    {3: "int key", 2.5: "float key", False: "bool key", None: "none key"},
    [math.inf, -math.inf, 1e300, 0.1, 10**30],
    "just a string ✓",
    12,
    None,
    {"deep": [[[{"x": [{}]}]]], "t": (1, 2)},
    {"when": Decimal("1.5"), "raw": b"bytes"},  # not JSON: default=str writes them
]


def _outcome(encode: Any, value: Any) -> Any:
    try:
        return encode(value)
    except (TypeError, ValueError) as error:
        return type(error)


@pytest.mark.parametrize(
    "options",
    [
        {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")},
        {"ensure_ascii": False, "separators": (", ", ": "), "default": str},
        {"sort_keys": True, "ensure_ascii": False, "separators": (", ", ": "), "default": str},
        {"ensure_ascii": True},
    ],
)
def test_encoders_write_what_the_standard_library_writes(options: dict[str, Any]) -> None:
    standard = json.JSONEncoder(**options).encode
    for fast in (encoder(**options), encoder(**options, check_circular=False)):
        assert [_outcome(fast, v) for v in VALUES] == [_outcome(standard, v) for v in VALUES]


def test_a_circular_value_is_an_error_and_leaves_nothing_behind() -> None:
    loop: list[Any] = []
    loop.append(loop)
    checked, unchecked = encoder(default=str), encoder(default=str, check_circular=False)
    with pytest.raises(ValueError, match="Circular"):
        checked({"a": loop})
    with pytest.raises(RecursionError):
        unchecked({"a": loop})
    shared = {"x": 1}
    assert checked([shared, shared]) == json.dumps([shared, shared])  # seen twice, not circular
    assert unchecked([shared, shared]) == checked([shared, shared])


@pytest.mark.parametrize(
    "text",
    [
        '{"path": "a.txt"}',
        ' {"path": "a.txt"} ',
        '{"a": {"b": [1, 2.5e3, null, true]}, "c": "\\u00e9"}',
        "[1, 2]",
        '"{}"',
        "{}",
        "3",
    ],
)
def test_loads_reads_what_json_loads_reads(text: str) -> None:
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"path": "a.txt"} {"x": 1}',
        '{"path": "a\tb"}',  # a raw control character: strict JSON refuses it
        '{"path": }',
        "{",
        '{"a": 1}}',
        "",
    ],
)
def test_loads_refuses_what_json_loads_refuses_with_its_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as standard:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as fast:
        loads(text)
    assert str(fast.value) == str(standard.value)
