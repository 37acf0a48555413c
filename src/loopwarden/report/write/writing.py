"""The writing stages after exploration: draft, reflect, bibliography, compile. Each is an async
generator of events that leaves its result on the shared `Writing` state; the pipeline wraps
each in its milestones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from ...events import Event
from ...models.base import Message
from ..atomic import atomic_write
from ..config import DRAFT_ATTEMPTS
from ..events import CitationsRemoved, CompileError, ReflectionVerdict
from .bib import Source, bibtex_entries, check_citations, with_bibliography
from .compile import compile_tex
from .draft import (
    DRAFT_PROMPT_SHARE,
    REINFORCEMENT,
    Outcome,
    Session,
    draft_messages,
    failure_event,
    latex_with_retries,
)
from .offline_writer import WriterInput, offline_report
from .reflect import RoundResult, change_fraction, model_round, offline_review

MAX_REPAIRS = 2
REPAIR_CONTEXT_LINES = 6


@dataclass
class Writing:
    inp: WriterInput
    session: Session
    offline: bool
    strict: bool = False
    draft_attempts: int = DRAFT_ATTEMPTS
    tex: str = ""
    drafted_by: str = "offline writer"
    failures: list[str] = field(default_factory=list)
    """Stop reasons that make the run degraded (or failed under strict)."""
    fatal: str | None = None
    reflection: str | None = None
    cited: list[str] = field(default_factory=list)
    pdf_ok: bool = False
    compile_message: str = ""

    @property
    def sources_for_model(self) -> list[dict[str, object]]:
        return [{"key": s.key, "title": s.title, "authors": s.authors, "file": s.path} for s in self.inp.sources]

    @property
    def out_dir(self) -> Path:
        return self.session.workdir


# -- draft --------------------------------------------------------------------------------------


async def draft(w: Writing) -> AsyncIterator[Event]:
    if w.offline:
        w.tex = offline_report(w.inp)
        return
    outcome = Outcome()
    budget = w.session.prompt_budget(DRAFT_PROMPT_SHARE)
    messages = draft_messages(w.inp, w.sources_for_model, budget)
    async for event in latex_with_retries(w.session, "draft", messages, outcome, max_attempts=w.draft_attempts):
        yield event
    if outcome.tex is not None:
        w.tex, w.drafted_by = outcome.tex, w.session.model.name
        return
    if w.strict:
        w.fatal = "draft_failed"
        yield failure_event(w.session, "draft", outcome, "the run fails (--strict)")
        return
    w.failures.append("draft_failed")
    w.tex = offline_report(w.inp)
    w.offline = True  # the rest of the run reviews and keeps the offline writer's report
    yield failure_event(w.session, "draft", outcome, "the offline writer's report is used instead")


# -- reflect ------------------------------------------------------------------------------------


async def reflect_round(w: Writing, index: int) -> AsyncIterator[Event]:
    """One round; sets `w.reflection` to the reason to stop when the loop has converged."""
    if w.offline:
        result = _offline_round(w)
    else:
        results: list[RoundResult] = []
        async for event in model_round(w.session, w.inp, w.tex, w.sources_for_model, results):
            yield event
        result = results[0]
    w.tex = result.tex
    verdict = result.verdict
    yield w.session.stamp(
        ReflectionVerdict,
        round=index,
        major_issues=verdict.major_issues if verdict else [],
        minor_issues=verdict.minor_issues if verdict else [],
        done=bool(verdict and verdict.done),
        change=result.change,
        outcome=result.outcome,
    )
    if result.stop:
        w.reflection = result.outcome
    if result.outcome == "model_error":
        w.failures.append("reflection_model_error")  # the review was cut short, not finished


def _offline_round(w: Writing) -> RoundResult:
    verdict = offline_review(w.inp, w.tex)
    if verdict.done:
        return RoundResult(verdict, w.tex, None, "converged_done")
    revised = offline_report(w.inp)
    change = change_fraction(w.tex, revised)
    return RoundResult(verdict, revised, change, "converged_unchanged" if change < 0.01 else "continue")


# -- bibliography -------------------------------------------------------------------------------


async def bibliography(w: Writing) -> AsyncIterator[Event]:
    known = {s.key for s in w.inp.sources}
    check = check_citations(w.tex, known)
    if check.removed or check.removed_bibliography:
        keys = sorted(set(check.removed))
        parts = (
            [f"removed {len(keys)} citation key(s) that name no source in the folder: {', '.join(keys)}"]
            if keys
            else []
        )
        if check.removed_bibliography:
            parts.append("removed a hand-written bibliography (entries must come from the folder's sources)")
        yield w.session.stamp(CitationsRemoved, keys=keys, message="; ".join(parts))
    w.cited = check.cited
    w.tex = with_bibliography(check.tex, bool(check.cited))
    write_outputs(w.out_dir, w.tex, w.inp.sources, w.cited)


def write_outputs(out_dir: Path, tex: str, sources: list[Source], cited: list[str]) -> None:
    atomic_write(out_dir / "report.tex", tex)
    bib = out_dir / "references.bib"
    if cited:
        atomic_write(bib, bibtex_entries(sources, cited))
    elif bib.exists():
        bib.unlink()


# -- compile ------------------------------------------------------------------------------------


async def compile_report(w: Writing, *, timeout: float) -> AsyncIterator[Event]:
    tex_path = w.out_dir / "report.tex"
    for attempt in range(1, MAX_REPAIRS + 2):
        result = await compile_tex(tex_path, w.session.tools, timeout=timeout)
        if result.ok:
            w.pdf_ok = True
            w.compile_message = " → ".join(result.passes)
            return
        assert result.error is not None
        can_repair = not w.offline and attempt <= MAX_REPAIRS
        yield w.session.stamp(
            CompileError,
            attempt=attempt,
            message=result.error.message,
            line=result.error.line,
            context=result.error.context,
            pass_name=result.error.pass_name,
            kept_pdf=(w.out_dir / "report.pdf").is_file(),
            will_repair=can_repair,
        )
        w.compile_message = result.error.describe()
        if not can_repair:
            break
        outcome = Outcome()
        async for event in latex_with_retries(
            w.session,
            "repair",
            repair_messages(w.tex, result.error.describe(), result.error.line),
            outcome,
            max_attempts=1,
        ):
            yield event
        if outcome.tex is None:
            break
        w.tex = with_bibliography(check_citations(outcome.tex, {s.key for s in w.inp.sources}).tex, bool(w.cited))
        write_outputs(w.out_dir, w.tex, w.inp.sources, w.cited)
    w.failures.append("compile_failed")


def repair_messages(tex: str, error: str, line: int | None) -> list[Message]:
    excerpt = ""
    if line is not None:
        lines = tex.splitlines()
        lo, hi = max(0, line - REPAIR_CONTEXT_LINES), min(len(lines), line + REPAIR_CONTEXT_LINES)
        excerpt = "\n".join(f"{n + 1:5d}  {lines[n]}" for n in range(lo, hi))
    request = (
        f"This LaTeX report does not compile with xelatex. The log's first error: {error}\n"
        + (f"Around that line:\n{excerpt}\n\n" if excerpt else "\n")
        + "Fix the error without changing the content. "
        + REINFORCEMENT
    )
    return [
        {"role": "system", "content": "You repair LaTeX documents so that they compile with xelatex."},
        {"role": "user", "content": f"{request}\n\nThe full source:\n{tex}"},
    ]
