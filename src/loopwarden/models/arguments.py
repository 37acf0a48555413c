"""Reading a model's tool-call arguments leniently, and saying what had to be repaired.

Small models write arguments whose meaning is clear but which `json.loads` refuses: raw
newlines or tabs inside strings ("Invalid control character"), text after the object,
chat-template tokens glued on (`{"path": "a.txt"}<|im_end|>`), a ```json fence around it.
`parse_arguments` tries, in order: strict JSON, JSON with control characters allowed
(`strict=False`), then the first complete JSON value with the damage around it cut away. Each
step past the first is named in `Parsed.repair`, so the event can say the call was repaired.
Anything else stays an error the model reads (`invalid_arguments`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..hotpath.fastjson import loads
from ..hotpath.frozen import quick_init

TEMPLATE_TOKENS = re.compile(
    r"<\|(?:im_start|im_end|im_sep|eot_id|eom_id|end_of_text|begin_of_text|start_header_id|end_header_id|"
    r"endoftext|end|assistant|user|system|python_tag|file_separator)\|>"
    r"|<(?:start_of_turn|end_of_turn|eos|bos)>|</s>|<s>|\[/?INST\]",
    re.IGNORECASE,
)
"""Chat-template control tokens some servers pass through into generated text."""

_FENCE = re.compile(r"^```[a-zA-Z_]*\s*(?P<inner>.*?)\s*```$", re.DOTALL)


@quick_init  # one per proposed call
@dataclass(frozen=True, slots=True)
class Parsed:
    value: Any
    error: str | None = None
    """Why the text could not be read as JSON (then `value` is the raw text)."""
    repair: str | None = None
    """What was mended to read it (None when it was valid JSON as sent)."""


def parse_arguments(raw: str | None) -> Parsed:
    if raw is None or not raw.strip():
        return Parsed({})
    try:
        return _unwrapped(loads(raw), None)
    except (json.JSONDecodeError, RecursionError) as error:
        first_error = str(error)
    repairs: list[str] = []
    try:
        value = json.loads(raw, strict=False)
        return _unwrapped(value, "control characters inside strings accepted")
    except (json.JSONDecodeError, RecursionError):
        pass
    text = raw.strip()
    cleaned = TEMPLATE_TOKENS.sub("", text).strip()
    if cleaned != text:
        repairs.append("chat-template tokens removed")
        text = cleaned
    fenced = _FENCE.match(text)
    if fenced:
        repairs.append("code fence removed")
        text = fenced["inner"].strip()
    found = first_json_value(text)
    if found is None:
        return Parsed(raw, error=first_error)
    value, start, end = found
    if text[:start].strip():
        repairs.append(f"text before the JSON removed ({text[:start].strip()[:40]!r})")
    if text[end:].strip():
        repairs.append(f"text after the JSON removed ({text[end:].strip()[:40]!r})")
    try:
        json.loads(text[start:end])
    except (json.JSONDecodeError, RecursionError):
        repairs.insert(0, "control characters inside strings accepted")
    return _unwrapped(value, "; ".join(repairs))


def _unwrapped(value: Any, repair: str | None) -> Parsed:
    """Arguments encoded twice (a JSON string holding the JSON object) are read once more."""
    if isinstance(value, str) and value.strip().startswith("{"):
        inner = parse_arguments(value)
        if inner.error is None and isinstance(inner.value, dict):
            told = "; ".join(r for r in (repair, "arguments were encoded twice", inner.repair) if r)
            return Parsed(inner.value, None, told)
    return Parsed(value, None, repair)  # by position: keywords to a class cost a dict


def first_json_value(text: str) -> tuple[Any, int, int] | None:
    """The first JSON object (or array) in the text that decodes, control characters allowed:
    (value, start, end)."""
    decoder = json.JSONDecoder(strict=False)
    for match in re.finditer(r"[{\[]", text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError):
            continue
        return value, match.start(), end
    return None
