"""Reflection: the main model reviews the draft against the findings and the template and returns
a structured verdict; the draft is revised; the loop stops when the verdict says done or a
revision no longer changes the text materially. Offline, a deterministic reviewer checks the draft
for the facts it must carry, and the offline writer is the reviser.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError

from ...events import Event
from ...models.base import Message
from .draft import REINFORCEMENT, Outcome, Session, facts_for_model, latex_with_retries
from .latex import escape
from .offline_writer import WriterInput

MATERIAL_CHANGE = 0.01
"""A revision that changes less than this fraction of the words is no change."""

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class Verdict(BaseModel):
    major_issues: list[str] = Field(default_factory=list)
    minor_issues: list[str] = Field(default_factory=list)
    done: bool = False


REVIEW_SYSTEM = (
    "You review a LaTeX report against the facts it must report and the template it must follow. "
    'Answer with JSON only: {"major_issues": [...], "minor_issues": [...], "done": true|false}. '
    "Major issues: missing or wrong facts, missing required sections or figures, claims the facts do not "
    "support, unstated gaps. Set done to true when nothing major is left."
)


def parse_verdict(text: str | None) -> Verdict | None:
    found = _JSON_OBJECT.search(text or "")
    if found is None:
        return None
    try:
        return Verdict.model_validate(json.loads(found.group(0)))
    except (json.JSONDecodeError, ValidationError):
        return None


def change_fraction(before: str, after: str) -> float:
    """How much of the text a revision changed, by words (0 = identical)."""
    a, b = before.split(), after.split()
    if not a and not b:
        return 0.0
    return 1.0 - difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


REVIEW_FACTS_SHARE = 0.25
"""Of the context window, what the facts may take in a review (the report itself is longer)."""


def review_messages(
    inp: WriterInput, tex: str, sources: list[dict[str, object]], budget: int | None = None
) -> list[Message]:
    facts = facts_for_model(inp, sources, budget)
    sections = [s.title_in(inp.lang) for s in inp.template.sections]
    checks = offline_review(inp, tex)
    found = [*checks.major_issues, *checks.minor_issues]
    automatic = "\n".join(f"- {issue}" for issue in found) if found else "- none"
    user = (
        f"Facts (JSON):\n{json.dumps(facts, ensure_ascii=False, indent=1)}\n\n"
        f"Required sections, in order: {', '.join(sections)}\n\n"
        f"Automatic checks of the report against the facts found:\n{automatic}\n\nReport:\n{tex}"
    )
    return [{"role": "system", "content": REVIEW_SYSTEM}, {"role": "user", "content": user}]


def revise_messages(review: list[Message], tex: str, verdict: Verdict) -> list[Message]:
    issues = "\n".join(f"- (major) {i}" for i in verdict.major_issues) + "\n"
    issues += "\n".join(f"- (minor) {i}" for i in verdict.minor_issues)
    request = (
        f"Revise the report to fix these issues:\n{issues}\n\n"
        "Keep everything that is right. Use only the facts given. " + REINFORCEMENT
    )
    return [*review, {"role": "assistant", "content": verdict.model_dump_json()}, {"role": "user", "content": request}]


@dataclass
class RoundResult:
    verdict: Verdict | None
    tex: str
    change: float | None
    outcome: str
    """continue | converged_done | converged_unchanged | verdict_unreadable | model_error | revision_rejected."""

    @property
    def stop(self) -> bool:
        return self.outcome != "continue"


async def model_round(
    session: Session, inp: WriterInput, tex: str, sources: list[dict[str, object]], result: list[RoundResult]
) -> AsyncIterator[Event]:
    """One review + revision with the model; appends its RoundResult to `result`."""
    review = review_messages(inp, tex, sources, session.prompt_budget(REVIEW_FACTS_SHARE))
    verdict, text = None, None
    messages = list(review)
    for _ in range(2):  # one reminder for a verdict that is not the JSON asked for
        text, events = await session.ask(messages, "review")
        for event in events:
            yield event
        verdict = parse_verdict(text)
        if verdict is not None or text is None:
            break
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": "Answer with the JSON verdict only, as specified."},
        ]
    if verdict is None:
        result.append(RoundResult(None, tex, None, "model_error" if text is None else "verdict_unreadable"))
        return
    if verdict.done:
        result.append(RoundResult(verdict, tex, None, "converged_done"))
        return
    outcome = Outcome()
    async for event in latex_with_retries(
        session, "revision", revise_messages(review, tex, verdict), outcome, max_attempts=2
    ):
        yield event
    if outcome.tex is None:
        result.append(RoundResult(verdict, tex, None, "revision_rejected"))
        return
    change = change_fraction(tex, outcome.tex)
    state = "converged_unchanged" if change < MATERIAL_CHANGE else "continue"
    result.append(RoundResult(verdict, outcome.tex, change, state))


def offline_review(inp: WriterInput, tex: str) -> Verdict:
    """What a careful reader checks without a model: every fact the record holds is in the text."""
    major: list[str] = []
    minor: list[str] = []
    for spec in inp.template.sections:
        if escape(spec.title_in(inp.lang)) not in tex:
            major.append(f"missing section: {spec.title_in(inp.lang)}")
    if inp.figures_on:
        major += [f"figure not included: {f.path}" for f in inp.record.figures if f.path not in tex]
    major += [f"finding not reported: {f[:60]}" for f in inp.record.key_findings if escape(f) not in tex]
    minor += [f"gap not stated: {g.message[:60]}" for g in inp.gaps if escape(g.message) not in tex]
    for table in inp.record.tables:
        minor += [f"column not named: {c}" for c in table.columns if escape(c) not in tex][:3]
    return Verdict(major_issues=major, minor_issues=minor, done=not major)
