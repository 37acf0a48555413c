"""Verifiers check an output before it is accepted. A verifier returns None when the text is
acceptable, or a message naming what is wrong; the loop then asks again with no tools."""

from __future__ import annotations

from collections.abc import Callable

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
