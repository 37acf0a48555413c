"""Tool-call markup leaked into a reply's text.

DeepSeek models sometimes write their native tool-call syntax into `content` instead of the
structured `tool_calls` field, and some servers pass it through. Left alone, the run would end
with a wall of markup as its "answer" and no tool ever running. Two syntaxes are known:

    <｜DSML｜tool_calls>                                  (V3.2 / V4 "DSML"; also function_calls)
    <｜DSML｜invoke name="read_file">
    <｜DSML｜parameter name="path" string="true">a.txt</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file   (V3 / R1)
    ```json
    {"path": "a.txt"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

The bars appear as fullwidth `｜`, ASCII `|` or `‖`, sometimes doubled. `find_leaked_calls`
recovers the calls it can read and returns the text with the markup removed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_BAR = r"[|｜‖]{1,2}"
_DSML = rf"{_BAR}\s*DSML\s*{_BAR}"
MARKUP_HINT = re.compile(rf"<\s*/?\s*{_DSML}|<{_BAR}tool[▁_ ]call", re.IGNORECASE)

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


def has_markup(text: str | None) -> bool:
    return bool(text) and MARKUP_HINT.search(text or "") is not None


def find_leaked_calls(text: str | None) -> LeakedMarkup | None:
    """None when the text carries no tool-call markup."""
    if text is None or not has_markup(text):
        return None
    calls = [_dsml_call(m) for m in _INVOKE.finditer(text)]
    calls += [LeakedCall(m["name"], _legacy_arguments(m["args"])) for m in _LEGACY_CALL.finditer(text)]
    rest = _LEGACY_CALL.sub("", _INVOKE.sub("", text))
    rest = _LEGACY_TAG.sub("", _DSML_TAG.sub("", rest)).strip()
    return LeakedMarkup(calls=calls, text=rest or None, unreadable=not calls)


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


def _legacy_arguments(raw: str) -> str:
    fenced = _FENCE.match(raw.strip())
    return (fenced["inner"] if fenced else raw).strip() or "{}"
