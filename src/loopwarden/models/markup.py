"""Tool-call markup written into a reply's text: the one detector.

Models write their chat template's tool-call syntax into `content` instead of the structured
`tool_calls` field, and many servers pass it through. Left alone, a run ends with markup as its
"answer" and no tool ever running. The client (`wire.recover_leaked_calls`), the answer verifier
(`verify.no_tool_markup`), the draft checks and the eval's `no_markup` all ask this module.

Formats known (as real chat templates emit them):

    <｜DSML｜invoke name="read_file"> <｜DSML｜parameter name="path" string="true">a.txt</...>   DeepSeek V3.2/V4
    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file ```json {...}```   DeepSeek V3/R1
    <tool_call>{"name": "read_file", "arguments": {...}}</tool_call>     Hermes, Qwen
    functions.read_file:\\n{"path": "a.txt"}                              llama.cpp chatml-function-calling
    <function=read_file>{"path": "a.txt"}</function>                     Llama 3.1
    <|python_tag|>{"name": ...}    [TOOL_CALLS] [{"name": ...}]           Llama 3, Mistral
    ```tool_code read_file(...)```                                       Gemma
    {"name": "read_file", "arguments": {...}}  /  {"tool_calls": [...]}  a call written as JSON

Bars appear as fullwidth `｜`, ASCII `|` or `‖`, sometimes doubled. Chat-template control tokens
(`<|im_end|>`, `<end_of_turn>`) are not calls: `strip_template_tokens` removes them from text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .arguments import TEMPLATE_TOKENS, first_json_value, parse_arguments

_BAR = r"[|｜‖]{1,2}"
_DSML = rf"{_BAR}\s*DSML\s*{_BAR}"
_LINE_START = r"(?:^|\n)[ \t]*(?:<\|im_start\|>assistant\s*)?"

FAMILIES: list[tuple[str, re.Pattern[str]]] = [
    ("DeepSeek DSML tool-call markup (<｜DSML｜...>)", re.compile(rf"<\s*/?\s*{_DSML}", re.IGNORECASE)),
    (
        "DeepSeek tool-call tokens (<｜tool▁calls▁begin｜> and family)",
        re.compile(rf"<\s*{_BAR}\s*tool[▁_ ](calls?|sep|outputs?)[▁_ ]?(begin|end)?\s*{_BAR}\s*>", re.IGNORECASE),
    ),
    (
        "<tool_call> tags",
        re.compile(r"<\s*/?\s*(tool_calls?|function_calls?|tool_use)\b[^>]*>|<\s*invoke\s+name\s*=\s*\"", re.I),
    ),
    (
        "a functions.NAME: call (llama.cpp chatml-function-calling)",
        re.compile(rf"{_LINE_START}functions?\.[A-Za-z_][\w.\-]*[ \t]*:[ \t]*\n?[ \t]*\{{"),
    ),
    ("a <function=NAME> call (Llama 3.1)", re.compile(r"<function\s*=\s*[\w.\-]+\s*>", re.IGNORECASE)),
    ("<|python_tag|> (Llama 3)", re.compile(r"<\|python_tag\|>", re.IGNORECASE)),
    ("[TOOL_CALLS] (Mistral)", re.compile(r"\[TOOL_CALLS\]")),
    ("a ```tool_code block (Gemma)", re.compile(r"```tool_(?:code|call)\b", re.IGNORECASE)),
    (
        "a tool_calls JSON object",
        re.compile(
            r"\"(?:tool_calls|function_call)\"\s*:\s*[\[{]\s*[{\"]"
            r"|\{\s*\"(?:name|tool)\"\s*:\s*\"[\w.\-]+\"\s*,\s*\"(?:arguments|parameters|args)\"\s*:",
            re.IGNORECASE,
        ),
    ),
]

# -- recovery patterns: the formats whose calls can be read back --------------------------------

_INVOKE = re.compile(
    rf"<\s*{_DSML}\s*invoke\s+name\s*=\s*\"(?P<name>[^\"]*)\"\s*>(?P<body>.*?)(?:<\s*/\s*{_DSML}\s*invoke\s*>|(?=<\s*{_DSML}\s*invoke\b)|\Z)",
    re.IGNORECASE | re.DOTALL,
)
_PARAMETER = re.compile(
    rf"<\s*{_DSML}\s*parameter\s+name\s*=\s*\"(?P<name>[^\"]*)\"(?:\s+string\s*=\s*\"(?P<string>true|false)\")?\s*>"
    rf"(?P<value>.*?)<\s*/\s*{_DSML}\s*parameter\s*>",
    re.IGNORECASE | re.DOTALL,
)
_DSML_TAG = re.compile(rf"<\s*/?\s*{_DSML}[^>]*>", re.IGNORECASE)
_LEGACY_CALL = re.compile(
    rf"<{_BAR}tool[▁_ ]call[▁_ ]begin{_BAR}>\s*(?:function\s*)?<{_BAR}tool[▁_ ]sep{_BAR}>\s*(?P<name>[\w.\-]+)\s*"
    rf"(?P<args>.*?)\s*<{_BAR}tool[▁_ ]call[▁_ ]end{_BAR}>",
    re.IGNORECASE | re.DOTALL,
)
_LEGACY_TAG = re.compile(rf"<{_BAR}tool[▁_ ][\w▁ ]+?{_BAR}>", re.IGNORECASE)
_TAGGED = re.compile(r"<\s*tool_call\s*>(?P<body>.*?)(?:<\s*/\s*tool_call\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_FUNCTIONS_DOT = re.compile(rf"{_LINE_START}functions?\.(?P<name>[A-Za-z_][\w.\-]*)[ \t]*:")
_FUNCTION_EQ = re.compile(r"<function\s*=\s*(?P<name>[\w.\-]+)\s*>(?P<body>.*?)(?:</function>|\Z)", re.I | re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(?P<inner>.*?)\s*```$", re.DOTALL)


@dataclass
class LeakedCall:
    name: str
    arguments: str
    """JSON text, as a structured tool call would carry it."""


@dataclass
class LeakedMarkup:
    calls: list[LeakedCall] = field(default_factory=list)
    text: str | None = None
    """The text with the markup removed; None when nothing else was said."""
    unreadable: bool = False
    """Markup was found but no call could be read from it."""
    family: str = ""
    """Which format it was (the first found)."""


def find_markup(text: str | None) -> tuple[str, str] | None:
    """(the format's name, the text that matched) for the first tool-call markup in the text."""
    if not text:
        return None
    for name, pattern in FAMILIES:
        match = pattern.search(text)
        if match is not None:
            return name, match.group(0).strip()
    return None


def has_markup(text: str | None) -> bool:
    return find_markup(text) is not None


def strip_template_tokens(text: str | None) -> str | None:
    """The text without chat-template control tokens (`<|im_end|>`, `<end_of_turn>`)."""
    if not text:
        return text
    return TEMPLATE_TOKENS.sub("", text).strip() or None


def find_leaked_calls(text: str | None) -> LeakedMarkup | None:
    """None when the text carries no tool-call markup; else the calls that could be read and
    the text that is left."""
    found = find_markup(text)
    if text is None or found is None:
        return None
    calls: list[LeakedCall] = []
    rest = text
    for pattern, read in ((_INVOKE, _dsml_call), (_LEGACY_CALL, _legacy_call), (_TAGGED, _tagged_call)):
        calls += [c for m in pattern.finditer(rest) if (c := read(m)) is not None]
        rest = pattern.sub("", rest)
    rest, more = _functions_calls(rest)
    calls += more
    for m in list(_FUNCTION_EQ.finditer(rest)):
        calls.append(LeakedCall(m["name"], _json_text(m["body"]) or "{}"))
    rest = _FUNCTION_EQ.sub("", rest)
    if not calls:
        whole = _whole_json_call(rest)
        if whole:
            calls, rest = whole, ""
    rest = _LEGACY_TAG.sub("", _DSML_TAG.sub("", rest))
    rest = strip_template_tokens(rest) or ""
    return LeakedMarkup(calls=calls, text=rest.strip() or None, unreadable=not calls, family=found[0])


def _dsml_call(match: re.Match[str]) -> LeakedCall:
    arguments: dict[str, Any] = {}
    for p in _PARAMETER.finditer(match["body"]):
        value = p["value"]
        if p["string"] == "false":
            try:
                arguments[p["name"]] = json.loads(value)
                continue
            except (json.JSONDecodeError, RecursionError):
                pass  # not JSON after all: keep the text, the schema check will judge it
        arguments[p["name"]] = value
    return LeakedCall(match["name"].strip(), json.dumps(arguments, ensure_ascii=False))


def _legacy_call(match: re.Match[str]) -> LeakedCall:
    raw = match["args"].strip()
    fenced = _FENCE.match(raw)
    return LeakedCall(match["name"], (fenced["inner"] if fenced else raw).strip() or "{}")


def _tagged_call(match: re.Match[str]) -> LeakedCall | None:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Hermes, Qwen)."""
    parsed = parse_arguments(match["body"])
    return _named_call(parsed.value) if parsed.error is None else None


def _named_call(value: Any) -> LeakedCall | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", value.get("args", {})))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return LeakedCall(value["name"], text)


def _functions_calls(text: str) -> tuple[str, list[LeakedCall]]:
    """`functions.NAME:` followed by a JSON object, as llama.cpp's chatml-function-calling
    template writes a call; each one is cut out of the text."""
    calls: list[LeakedCall] = []
    pieces: list[str] = []
    position = 0
    for m in _FUNCTIONS_DOT.finditer(text):
        if m.start() < position:
            continue
        found = first_json_value(text[m.end() :])
        if found is None or text[m.end() : m.end() + found[1]].strip():
            continue  # the JSON must follow the colon directly
        value, _, end = found
        calls.append(LeakedCall(m["name"], json.dumps(value, ensure_ascii=False)))
        pieces.append(text[position : m.start()])
        position = m.end() + end
    pieces.append(text[position:])
    return "".join(pieces), calls


def _json_text(body: str) -> str | None:
    parsed = parse_arguments(body)
    return json.dumps(parsed.value, ensure_ascii=False) if parsed.error is None else None


def _whole_json_call(text: str) -> list[LeakedCall] | None:
    """The whole reply is one call written as JSON (bare, fenced, or a tool_calls object)."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    parsed = parse_arguments(fenced["inner"] if fenced else stripped)
    if parsed.error is not None or not isinstance(parsed.value, dict):
        return None
    value = parsed.value
    listed = value.get("tool_calls")
    if isinstance(listed, list):
        calls = [_named_call(c.get("function", c)) for c in listed if isinstance(c, dict)]
        return [c for c in calls if c is not None] or None
    call = _named_call(value.get("function_call", value))
    return [call] if call is not None else None
