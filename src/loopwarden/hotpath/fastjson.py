"""JSON on the loop's hot path, with the standard library's C accelerators called directly.

`json.JSONEncoder.encode` builds a new C encoder on every call and `json.loads` goes through two
Python frames and two whitespace matches; a step encodes three small objects and reads one, so
that setup was about a tenth of what the guard itself costs a step. The output is the standard
library's, byte for byte (tests/test_fastjson.py compares); where the accelerators are missing
(another Python implementation) the standard functions are used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _encoder
from typing import Any

_c_make_encoder = getattr(_encoder, "c_make_encoder", None)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner where there is one


def string_encoder(*, ensure_ascii: bool = True) -> Callable[[str], str]:
    """How `encoder(ensure_ascii=...)` writes a str, keys included: the function its C encoder
    calls for one (the standard library's Python one where there is no C one: the same bytes)."""
    return _encoder.encode_basestring_ascii if ensure_ascii else _encoder.encode_basestring


def encoder(
    *,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
    default: Callable[[Any], Any] | None = None,
    check_circular: bool = True,
) -> Callable[[Any], str]:
    """`json.JSONEncoder(...).encode` with these options, its C encoder made once. Without
    `check_circular`, a circular value raises RecursionError instead of ValueError (and the
    encoder keeps no state between calls at all)."""
    standard = json.JSONEncoder(
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        separators=separators,
        default=default,
        check_circular=check_circular,
    )
    if _c_make_encoder is None:
        return standard.encode
    strings = string_encoder(ensure_ascii=ensure_ascii)
    item_separator, key_separator = separators
    fallback = standard.default

    def make(markers: dict[int, Any] | None) -> Callable[[Any, int], Any]:
        return _c_make_encoder(  # type: ignore[no-any-return]
            markers, fallback, strings, None, key_separator, item_separator, sort_keys, False, True
        )

    if not check_circular:
        once = make(None)

        def encode_unchecked(value: Any) -> str:
            if isinstance(value, str):
                return strings(value)
            return "".join(once(value, 0))

        return encode_unchecked

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return strings(value)
        return "".join(make({})(value, 0))  # markers of its own: a call never sees another's

    return encode


def json_object(text: str | None) -> dict[str, Any] | None:
    """The JSON object `text` is, when it is one with nothing around it (`loads(text)` then); else None."""
    if text and text[:1] == "{" and text[-1:] == "}":
        try:
            value, end = _scan_once(text, 0)
        except (StopIteration, ValueError, RecursionError):
            return None
        if end == len(text) and type(value) is dict:
            return value
    return None


def loads(text: str) -> Any:
    """`json.loads(text)`; a JSON object with nothing around it is read by the C scanner directly."""
    if text[:1] == "{" and text[-1:] == "}":
        try:
            value, end = _scan_once(text, 0)
        except (StopIteration, ValueError):
            return json.loads(text)  # raises the error the standard function would
        if end == len(text):
            return value
    return json.loads(text)
