"""Named output checks a case can ask for (`verifiers: [no_markup]`)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..models.markup import MARKUP_HINT
from ..verify import Verifier

_MARKUP = re.compile(
    r"<\s*/?\s*(tool_call|function_call|tool_use|invoke|function)\b|<\s*[|｜‖]{1,2}\s*(DSML|tool)|<\|[a-z_]+\|>|\"(name|tool)\"\s*:\s*\"[^\"]+\"\s*,\s*\"(arguments|parameters)\"",
    re.IGNORECASE,
)


def no_markup(text: str) -> str | None:
    """Tool-call markup leaked into prose (a collapse during drafting) is not an answer."""
    match = _MARKUP.search(text) or MARKUP_HINT.search(text)  # ours, or the client's DSML detector
    return f"the text contains tool-call markup ({match.group(0)!r}); write plain prose" if match else None


def nonempty(text: str) -> str | None:
    return None if text.strip() else "the answer is empty"


VERIFIERS: dict[str, Callable[[str], str | None]] = {"no_markup": no_markup, "nonempty": nonempty}


def build_verifiers(names: list[str]) -> list[Verifier]:
    unknown = [n for n in names if n not in VERIFIERS]
    if unknown:
        raise ValueError(f"unknown verifier(s) {unknown}; known: {sorted(VERIFIERS)}")
    return [VERIFIERS[n] for n in names]
