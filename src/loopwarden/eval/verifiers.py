"""Named output checks a case can ask for (`verifiers: [no_markup]`)."""

from __future__ import annotations

from collections.abc import Callable

from ..models.arguments import TEMPLATE_TOKENS
from ..models.markup import find_markup
from ..verify import Verifier


def no_markup(text: str) -> str | None:
    """Tool-call markup (or chat-template tokens) leaked into prose is not an answer."""
    found = find_markup(text)
    if found is not None:
        return f"the text contains tool-call markup ({found[0]}: {found[1][:60]!r}); write plain prose"
    token = TEMPLATE_TOKENS.search(text)
    return f"the text contains chat-template tokens ({token.group(0)!r}); write plain prose" if token else None


def nonempty(text: str) -> str | None:
    return None if text.strip() else "the answer is empty"


VERIFIERS: dict[str, Callable[[str], str | None]] = {"no_markup": no_markup, "nonempty": nonempty}


def build_verifiers(names: list[str]) -> list[Verifier]:
    unknown = [n for n in names if n not in VERIFIERS]
    if unknown:
        raise ValueError(f"unknown verifier(s) {unknown}; known: {sorted(VERIFIERS)}")
    return [VERIFIERS[n] for n in names]
