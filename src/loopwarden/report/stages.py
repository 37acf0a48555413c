"""The stages of a report run and the context they share. `run_stage` dispatches on the stage's
explicit name (never on its position), so a plan that changes shape still labels every stage."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..events import Event, EventStamper, Totals
from ..hooks import adapt_model
from ..models.base import Model
from ..policy.approval import ApprovalGate
from .atomic import atomic_write
from .config import ReportConfig
from .events import ExplorationDone, FigureMade, GapFound, ReportStatus, ScanDone
from .folder.scan import ScanResult, scan_folder
from .plan import Stage, Toolchain
from .record import ExplorationRecord
from .templates import Template
from .write.bib import Source, collect_sources
from .write.draft import Session
from .write.gap import Gap, find_gaps, has_material
from .write.latex import find_cjk_font, has_cjk
from .write.markdown import latex_to_markdown
from .write.offline_writer import WriterInput
from .write.writing import Writing, bibliography, compile_report, draft, reflect_round

OUTPUT_NAMES = ("report.tex", "report.pdf", "report.md", "references.bib", "events.jsonl", "exploration.json")

if TYPE_CHECKING:
    from .pipeline import ReportModels


@dataclass
class Context:
    config: ReportConfig
    stamp: EventStamper
    tools: Toolchain
    template: Template
    models: ReportModels
    record: ExplorationRecord | None = None
    approvals: ApprovalGate | None = None
    """Decides make_figure calls when `config.approve_code` is set."""
    scan: ScanResult | None = None
    gaps: list[Gap] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    writing: Writing | None = None
    stop_reasons: list[str] = field(default_factory=list)
    explore_totals: list[Totals] = field(default_factory=list)
    record_given: bool = False
    fatal: str | None = None
    notes: list[str] = field(default_factory=list)
    before: dict[str, int] = field(default_factory=dict)
    """Modification times of the output files that existed before the run."""

    def __post_init__(self) -> None:
        self.record_given = self.record is not None
        out = self.config.out_dir
        paths = [out / name for name in OUTPUT_NAMES]
        paths += list((out / "figures").iterdir()) if (out / "figures").is_dir() else []
        self.before = {str(p): p.stat().st_mtime_ns for p in paths if p.is_file()}

    # -- what the run ended as -------------------------------------------------------------------

    def skip_reason(self, stage: Stage) -> str | None:
        if self.fatal is not None:
            return f"not run: {self.fatal}"
        if stage.name == "explore" and self.record_given:
            return "exploration record given"
        if stage.name == "figures" and self.record is not None and not self.record.figures:
            return "no figures were made in exploration"
        if stage.name == "gap" and self.record is not None and not has_material(self.template, self.record):
            return "nothing required to check"
        if stage.name == "reflect" and self.writing is not None and self.writing.reflection is not None:
            return f"reflection stopped: {self.writing.reflection}"
        return None

    def totals(self) -> Totals:
        total = Totals()
        parts = [*self.explore_totals, *([self.writing.session.totals] if self.writing else [])]
        for part in parts:
            for name in Totals.model_fields:
                setattr(total, name, getattr(total, name) + getattr(part, name))
        return total

    def add_totals(self, totals: Totals) -> None:
        self.explore_totals.append(totals)

    def outputs(self) -> dict[str, str]:
        """What this run wrote. Files an earlier run left in the folder (a good PDF is never
        deleted) stay on disk but are not claimed."""
        out = self.config.out_dir
        found = {name: name for name in OUTPUT_NAMES if self._written_now(out / name)}
        if self.writing is None or not self.writing.pdf_ok:
            found.pop("report.pdf", None)
        figures = out / "figures"
        if figures.is_dir() and any(self._written_now(p) for p in figures.iterdir()):
            found["figures"] = "figures/"
        return found

    def _written_now(self, path: Path) -> bool:
        try:
            return path.is_file() and self.before.get(str(path)) != path.stat().st_mtime_ns
        except OSError:
            return False

    def coverage(self) -> dict[str, int]:
        if self.record is None:
            return {}
        counts: dict[str, int] = {}
        for entry in self.record.coverage.files:
            counts[entry.status] = counts.get(entry.status, 0) + 1
        return counts

    def suspected_injections(self) -> list[str]:
        return [i.describe() for i in self.record.suspected_injections] if self.record is not None else []

    def coverage_notes(self, limit: int = 20) -> list[str]:
        """One line per file (or group) not read in full, for the summary: what and why."""
        if self.record is None:
            return []
        from .folder.coverage import ledger_rows

        rows, left_out = ledger_rows(self.record.coverage, self.record.groups, limit=limit)
        lines = [f"{path}: {status} ({note})" if note else f"{path}: {status}"
                 for path, status, _, note in rows if status != "read"]  # fmt: skip
        return lines + ([f"... and {left_out} more"] if left_out and lines else [])

    def final_status(self) -> tuple[ReportStatus, str]:
        if self.fatal is not None:
            return "failed", f"the run failed: {self.fatal}"
        failures = self.writing.failures if self.writing else []
        self.stop_reasons += failures
        degraded = bool(failures) or bool(self.record and self.record.degraded) or bool(self.notes)
        if self.writing is not None and self.writing.reflection:
            self.stop_reasons.append(f"reflection_{self.writing.reflection}")
        pdf = "report.pdf" if self.writing and self.writing.pdf_ok else "report.tex (no PDF)"
        message = f"report written: {pdf}; drafted by {self.writing.drafted_by if self.writing else '-'}"
        if self.writing and self.writing.compile_message and not self.writing.pdf_ok:
            message += f"; compile failed: {self.writing.compile_message}"
        if self.notes:
            message += "; " + "; ".join(self.notes)
        if degraded and self.config.strict:
            return "failed", message + " (--strict)"
        return ("degraded" if degraded else "completed"), message

    def finish_outputs(self) -> None:
        if self.writing is not None and self.writing.tex:
            atomic_write(self.config.out_dir / "report.md", latex_to_markdown(self.writing.tex, self.sources))


async def run_stage(ctx: Context, stage: Stage, detail: dict[str, Any]) -> AsyncIterator[Event]:
    if stage.name == "scan":
        events = _scan(ctx, detail)
    elif stage.name == "explore":
        events = _explore(ctx, detail)
    elif stage.name == "figures":
        events = _figures(ctx, detail)
    elif stage.name == "gap":
        events = _gap(ctx, detail)
    elif stage.name == "draft":
        events = _draft(ctx, detail)
    elif stage.name == "reflect":
        assert stage.round is not None
        events = _reflect(ctx, stage.round, detail)
    elif stage.name == "bib":
        events = _bib(ctx, detail)
    else:
        events = _compile(ctx, detail)
    async for event in events:
        yield event
    if stage.name in ("bib", "compile"):
        ctx.finish_outputs()


async def _scan(ctx: Context, detail: dict[str, Any]) -> AsyncIterator[Event]:
    ctx.scan = await asyncio.to_thread(scan_folder, ctx.config.data_dir)  # a big folder must not block the loop
    detail.update(counts=ctx.scan.counts, files=len(ctx.scan.files))
    yield ctx.stamp(ScanDone, scan=ctx.scan.detail())


async def _explore(ctx: Context, detail: dict[str, Any]) -> AsyncIterator[Event]:
    assert ctx.scan is not None
    explore_module = importlib.import_module("loopwarden.report.explore.loop")
    model, vision = _explorer_models(ctx)
    async for event in explore_module.explore(
        ctx.config.data_dir,
        ctx.config.out_dir,
        model,
        stamper=ctx.stamp,
        scan=ctx.scan,
        strict=ctx.config.strict,
        allow_rlimits_only=ctx.config.allow_rlimits_only,
        vision=vision,
        **_approval_arguments(ctx),
    ):
        if isinstance(event, ExplorationDone):
            ctx.record = event.record
        yield event
    if ctx.record is None:
        ctx.fatal = "exploration ended without a record"
        return
    if not (ctx.config.out_dir / "exploration.json").is_file():
        atomic_write(ctx.config.out_dir / "exploration.json", ctx.record.model_dump_json(indent=2))
    if ctx.record.degraded:
        ctx.stop_reasons.append(f"exploration_{ctx.record.stop_reason or 'cut_off'}")
        if ctx.config.strict:
            ctx.fatal = f"exploration was cut off ({ctx.record.stop_reason}) and --strict is set"
    detail.update(
        findings=len(ctx.record.key_findings), figures=len(ctx.record.figures), stop_reason=ctx.record.stop_reason
    )


def _approval_arguments(ctx: Context) -> dict[str, Any]:
    # Only when asked for, so an explore() stand-in without these parameters still works.
    if not ctx.config.approve_code:
        return {}
    return {"approve_code": True, "approvals": ctx.approvals}


def _explorer_models(ctx: Context) -> tuple[Model, Model | None]:
    if ctx.models.explorer is not None:
        return ctx.models.explorer, _adapted(ctx.models.vision)
    endpoint = ctx.config.endpoint
    if endpoint is None:
        offline = importlib.import_module("loopwarden.report.explore.offline")
        explorer: Model = offline.OfflineExplorer()
        return explorer, None
    from ..models.openai_compat import build_model

    vision = ctx.models.vision or (build_model(endpoint, "vision") if endpoint.vision_model else None)
    return build_model(endpoint, "cheap"), _adapted(vision)


def _adapted(model: Model | None) -> Model | None:
    """A model called outside the agent's loop: a step in a durable run (hooks.adapt_model)."""
    return adapt_model(model) if model is not None else None


async def _figures(ctx: Context, detail: dict[str, Any]) -> AsyncIterator[Event]:
    assert ctx.record is not None
    kept = []
    for figure in ctx.record.figures:
        path = ctx.config.out_dir / figure.path
        if path.is_file() and path.stat().st_size > 0:
            kept.append(figure)
        else:
            yield ctx.stamp(
                FigureMade,
                path=figure.path,
                caption=figure.caption,
                ok=False,
                message="figure file is missing; left out of the report",
            )
    detail.update(figures=len(kept), dropped=len(ctx.record.figures) - len(kept))
    ctx.record = ctx.record.model_copy(update={"figures": kept})


async def _gap(ctx: Context, detail: dict[str, Any]) -> AsyncIterator[Event]:
    assert ctx.record is not None and ctx.scan is not None
    ctx.gaps = find_gaps(ctx.template, ctx.record, ctx.scan, figures_on=ctx.template.steps.figures)
    for gap in ctx.gaps:
        yield ctx.stamp(GapFound, kind=gap.kind, message=gap.message, requirement=gap.requirement)
    detail.update(gaps=len(ctx.gaps))


async def _draft(ctx: Context, detail: dict[str, Any]) -> AsyncIterator[Event]:
    ctx.writing = await asyncio.to_thread(_new_writing, ctx)  # reads documents for the sources
    async for event in draft(ctx.writing):
        yield event
    if ctx.writing.fatal is not None:
        ctx.fatal = ctx.writing.fatal
    detail.update(drafted_by=ctx.writing.drafted_by, chars=len(ctx.writing.tex))


def _new_writing(ctx: Context) -> Writing:
    assert ctx.scan is not None
    if ctx.record is None:  # explore was skipped because a record was given: still needs a scan
        raise RuntimeError("no exploration record")
    ctx.sources = collect_sources(ctx.config.data_dir, ctx.scan, reference_report=ctx.record.reference_report)
    # Chinese (or Japanese, Korean) names in the data need a CJK font even in an English report.
    needs_cjk = ctx.config.lang == "zh" or has_cjk(ctx.record.model_dump_json()) or has_cjk(ctx.scan.model_dump_json())
    cjk_font = find_cjk_font() if needs_cjk else None
    if ctx.config.lang == "zh" and cjk_font is None:
        ctx.notes.append("no CJK font installed: Chinese text may not render (install fonts-noto-cjk)")
        ctx.stop_reasons.append("no_cjk_font")
    inp = WriterInput(
        template=ctx.template,
        record=ctx.record,
        scan=ctx.scan,
        gaps=ctx.gaps,
        sources=ctx.sources,
        lang=ctx.config.lang,
        cjk_font=cjk_font,
        figures_on=ctx.template.steps.figures,
    )
    writer = ctx.models.writer
    if writer is None and ctx.config.endpoint is not None:
        from ..models.openai_compat import build_model

        writer = build_model(ctx.config.endpoint, "main")
    session = Session(
        _adapted(writer) or _NoModel(), ctx.stamp, Totals(), ctx.tools, ctx.config.out_dir, ctx.config.compile_timeout
    )
    if ctx.config.endpoint is not None:
        from ..models.config import default_prices

        session.prices = default_prices(ctx.config.endpoint)
    return Writing(
        inp=inp,
        session=session,
        offline=writer is None,
        strict=ctx.config.strict,
        draft_attempts=ctx.config.draft_attempts,
    )


class _NoModel:
    """Stands in for the writer offline; never called (offline stages do not ask a model)."""

    name = "offline-writer"

    async def complete(self, request: Any) -> Any:
        raise RuntimeError("the offline writer does not call a model")


async def _reflect(ctx: Context, round_: int, detail: dict[str, Any]) -> AsyncIterator[Event]:
    assert ctx.writing is not None
    async for event in reflect_round(ctx.writing, round_):
        yield event
    detail.update(round=round_, outcome=ctx.writing.reflection or "continue")


async def _bib(ctx: Context, detail: dict[str, Any]) -> AsyncIterator[Event]:
    assert ctx.writing is not None
    async for event in bibliography(ctx.writing):
        yield event
    detail.update(sources=len(ctx.sources), cited=len(ctx.writing.cited))


async def _compile(ctx: Context, detail: dict[str, Any]) -> AsyncIterator[Event]:
    assert ctx.writing is not None
    async for event in compile_report(ctx.writing, timeout=ctx.config.compile_timeout):
        yield event
    detail.update(pdf=ctx.writing.pdf_ok, passes=ctx.writing.compile_message)
    log = ctx.config.out_dir / ".build" / "report.log"
    if not ctx.writing.pdf_ok and log.is_file():
        detail["log"] = ".build/report.log"  # kept after a failure, for the user to read
