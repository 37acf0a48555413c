"""Verifiers check an output before it is accepted. A verifier returns None when the text is
acceptable, or a message naming what is wrong; the loop then asks again with no tools (up to
`LoopConfig.max_verify_retries`), and fails the run with `verifier_failed` if it never passes.

    Agent(model, tools, verifiers=[no_tool_markup, schema(Answer), predicate(lambda t: "%" in t, "give a percentage")])
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pydantic import BaseModel, ValidationError

Verifier = Callable[[str], "str | None"]


def first_failure(verifiers: list[Verifier], text: str) -> str | None:
    for verifier in verifiers:
        problem = verifier(text)
        if problem:
            return problem
    return None


def reinforcement(problem: str) -> str:
    return (
        f"Your last answer was not accepted: {problem}. "
        "You have no tools now; answer again with the complete final output only."
    )


# -- tool-call markup leaked into text ---------------------------------------------------------------


def no_tool_markup(text: str) -> str | None:
    """Rejects tool-call syntax written into the answer instead of sent as a structured call
    (every format `models.markup` knows)."""
    from .models.markup import find_markup  # its dozen patterns compile when a reply is first checked

    found = find_markup(text)
    if found is None:
        return None
    return f"the answer contains {found[0]}; tools are not available now, write the answer as plain text"


# -- building verifiers ----------------------------------------------------------------------------


def predicate(check: Callable[[str], bool], problem: str) -> Verifier:
    """A verifier from a yes/no check; `problem` tells the model what was wrong."""

    def verify(text: str) -> str | None:
        try:
            ok = check(text)
        except Exception as error:  # a broken check is a rejection with a reason, not a crash
            return f"{problem} (the check raised {type(error).__name__}: {error})"
        return None if ok else problem

    return verify


def extract_json(text: str) -> str:
    """The JSON part of a reply: the whole text, or the body of a ```json fence in it."""
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    return fence.group(1).strip() if fence else text.strip()


def schema(model: type[BaseModel]) -> Verifier:
    """Accepts a reply that is JSON (bare or in a ```json fence) valid against a pydantic model."""

    def verify(text: str) -> str | None:
        try:
            model.model_validate_json(extract_json(text))
        except ValidationError as error:
            return f"the answer must be JSON matching {model.__name__}: " + describe_errors(error)
        return None

    return verify


def describe_errors(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:8]:
        where = ".".join(str(p) for p in item["loc"]) or "(document)"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)
