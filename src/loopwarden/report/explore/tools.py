"""The exploration tools, built on one data root: list_dir, read_file, read_image, make_figure
and the phase's terminal tool finish_exploration. Every path argument goes through the path
guard; every failure is a structured result the model can act on; the coverage ledger is kept
here, from what the tools actually returned. The tools that add to it (all but list_dir) rerun
on recovery in a durable run (`rerun_on_recovery`), so a recovered run rebuilds it."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from ...models.base import Model
from ...tools import Tool, ToolResult, tool
from ..folder.coverage import CoverageTracker
from ..folder.groups import FileGroup, group_files
from ..folder.paths import OUT_OF_BOUNDS, OutOfBounds, PathGuard, shown_name
from ..folder.scan import IMAGE_EXTS, ScanResult, extension
from ..readers import FileReader
from ..readers.images import MAX_IMAGE_BYTES, OcrReader, read_image_bytes
from ..readers.injection import DATA_NOTICE, find_injections
from ..readers.tables import read_spec
from ..record import ExplorationRecord, FigureRecord, FileGroupRecord, SuspectedInjection, TableProfile
from ..sandbox.runner import FigureSandbox
from .hostpaths import scrub_host_paths

MAX_LISTING = 300
FIX_PATH = "use a path relative to the data folder, as shown by list_dir"


@dataclass
class ExplorationContext:
    root: Path
    out_dir: Path
    scan: ScanResult
    sandbox: FigureSandbox
    vision: Model | None = None
    ocr: OcrReader | None = None
    guard: PathGuard = field(init=False)
    reader: FileReader = field(init=False)
    coverage: CoverageTracker = field(init=False)
    figures: list[FigureRecord] = field(default_factory=list)
    tables: dict[str, TableProfile] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    """Text read per file (documents), for findings when the phase is cut off."""
    finished: ExplorationRecord | None = None
    injections: list[SuspectedInjection] = field(default_factory=list)
    """Text read that addresses an AI assistant (flagged in order of reading; events drain it)."""
    groups: list[FileGroup] = field(init=False)
    """Similar files: a group of many is explored through its samples."""
    statistics_failed: dict[str, str] = field(default_factory=dict)
    """Tables whose statistics could not be computed: path -> error (reported, never raised)."""

    def __post_init__(self) -> None:
        self.guard = PathGuard(self.root)
        self.reader = FileReader(self.guard)
        self.coverage = CoverageTracker(self.scan)
        self.groups = group_files(self.scan)

    def group_records(self) -> list[FileGroupRecord]:
        return [
            FileGroupRecord(pattern=g.pattern, count=len(g.paths), samples=g.samples, size=g.size)
            for g in self.groups
            if g.grouped
        ]

    @property
    def figures_enabled(self) -> bool:
        return self.sandbox.enabled

    def frames(self) -> dict[str, Any]:
        """The DataFrames of the tables read (their first rows when a table is big), by path."""
        frames: dict[str, Any] = {}
        for path in sorted(self.tables):
            table = self.reader.table(path.split("#")[0])
            if table is not None and path in table.frames:
                frames[path] = table.frames[path]
        return frames

    def flag(self, path: str, text: str) -> str:
        """`text` as the model gets it: with a notice that it is data when it addresses an AI."""
        seen = {(i.path, i.excerpt) for i in self.injections}
        found = [i for i in find_injections(path, text) if (i.path, i.excerpt) not in seen]
        self.injections += found
        flagged = found or any(i.path == path for i in self.injections)
        return f"{DATA_NOTICE}\n{text}" if flagged else text

    def scrub(self, text: str) -> str:
        """An error text fit for the model: no absolute host paths."""
        return scrub_host_paths(text, root=self.guard.root, out_dir=self.out_dir)


def out_of_bounds(path: object) -> ToolResult:
    return ToolResult.failure("out_of_bounds", f"{OUT_OF_BOUNDS}: {str(path)[:200]!r}", user_action=FIX_PATH)


def exploration_tools(ctx: ExplorationContext) -> list[Tool]:
    @tool
    def list_dir(path: str = ".") -> ToolResult:
        """List a folder of the data folder: sub-folders (ending in /) and files with sizes.

        Args:
            path: folder relative to the data folder; "." is the top
        """
        try:
            fd = ctx.guard.open_dir(path)
        except OutOfBounds:
            return out_of_bounds(path)
        try:
            lines = _listing(fd)
        finally:
            os.close(fd)
        if not lines:
            return ToolResult.success("(empty folder)")
        return ToolResult.success("\n".join(lines))

    @tool(blocking=True, rerun_on_recovery=True)  # a big PDF or spreadsheet takes seconds: always off the event loop
    def read_file(
        path: str,
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int | None, Field(ge=1)] = None,
    ) -> ToolResult:
        """Read a file of the data folder as text: documents (PDF, DOCX, notebooks, Markdown,
        LaTeX, text, JSON, YAML) by lines, clipped at 7000 characters; tables (CSV, TSV, XLSX) as
        a profile (shape, columns, statistics, first rows) unless offset/limit ask for raw lines.

        Args:
            path: file path relative to the data folder
            offset: first line to show (0-based), to continue a truncated read
            limit: how many lines to show at most
        """
        try:
            outcome = ctx.reader.read(path, offset, limit)
        except OutOfBounds:
            return out_of_bounds(path)
        except Exception as error:  # a corrupt PDF, a malformed CSV, a file gone: tell the model, keep going
            rel = _safe_rel(ctx, path)
            reason = ctx.scrub(f"{type(error).__name__}: {error}")
            ctx.coverage.note_skip(rel, f"unreadable: {reason}"[:300])
            return ToolResult.failure("unreadable", f"could not read {rel}: {reason}"[:500])
        ctx.coverage.note_read(outcome)
        for profile in outcome.tables:
            ctx.tables[profile.path] = profile
        if outcome.mode in ("text", "document"):
            ctx.texts[outcome.path] = ctx.texts.get(outcome.path, "") + outcome.text
        return ToolResult.success(ctx.flag(outcome.path, outcome.text))

    @tool(rerun_on_recovery=True)
    async def read_image(path: str, question: str = "") -> ToolResult:
        """Read an image of the data folder: what it shows, its text and numbers, its size.

        Args:
            path: image path relative to the data folder
            question: what to look for in the image
        """
        try:
            rel = ctx.guard.relative(path)
            fd = ctx.guard.open_file(path)
        except OutOfBounds:
            return out_of_bounds(path)
        try:
            with os.fdopen(fd, "rb") as f:
                data = f.read(MAX_IMAGE_BYTES + 1)
        except OSError as error:
            return ToolResult.failure("unreadable", f"could not read {rel}: {ctx.scrub(str(error))}"[:500])
        if len(data) > MAX_IMAGE_BYTES:
            ctx.coverage.note_skip(rel, "image larger than 20 MB")
            return ToolResult.failure("too_large", f"{rel} is larger than {MAX_IMAGE_BYTES >> 20} MB; not read")
        try:
            reading = await read_image_bytes(rel, extension(rel), data, question, vision=ctx.vision, ocr=ctx.ocr)
        except Exception as error:  # the vision endpoint or OCR failed: the run goes on
            reason = ctx.scrub(f"{type(error).__name__}: {error}")
            ctx.coverage.note_skip(rel, f"image reader failed: {reason}"[:300])
            return ToolResult.failure("image_reader_failed", f"{rel}: {reason}"[:500])
        ctx.coverage.note_image(rel, reading.reader, len(reading.text))
        ctx.texts[rel] = reading.text
        return ToolResult.success(ctx.flag(rel, reading.text))

    @tool(timeout=180, rerun_on_recovery=True)  # the figure list is rebuilt: its code runs again
    async def make_figure(code: str, filename: str, caption: str) -> ToolResult:
        """Draw a figure with matplotlib in an isolated process. Available names: plt, np, pd,
        math, statistics and load(path, every=1) -> DataFrame for a table of the data folder
        (every=N keeps every Nth row: use it for tables of millions of rows). Imports:
        matplotlib, numpy, pandas, math, statistics only. Do not call savefig: the runtime saves
        the current figure as figures/<filename>.png.

        Args:
            code: Python code that draws on the current matplotlib figure
            filename: a short file name for the figure, e.g. field_vs_position
            caption: one sentence saying what the figure shows
        """
        tables = {path: spec for path, profile in ctx.tables.items() if (spec := read_spec(profile)) is not None}
        outcome = await ctx.sandbox.run(code, filename, tables)
        if not outcome.ok or outcome.path is None:
            return ToolResult.failure(outcome.error_type or "figure_failed", outcome.message)
        sources = sorted(set(re.findall(r"load\(\s*['\"]([^'\"]+)['\"]", code)))
        ctx.figures = [f for f in ctx.figures if f.path != outcome.path]
        ctx.figures.append(FigureRecord(path=outcome.path, caption=caption, source_files=sources, code=code))
        return ToolResult.success({"path": outcome.path, "caption": caption}, message=outcome.message)

    @tool(terminal=True, rerun_on_recovery=True)
    def finish_exploration(
        experiment: Annotated[str, Field(min_length=3)],
        goal: Annotated[str, Field(min_length=3)],
        key_findings: Annotated[list[str], Field(min_length=1)],
        assignment_requirements: list[str] | None = None,
        methodology_notes: str | None = None,
        reference_report: str | None = None,
    ) -> ToolResult:
        """Finish the exploration with what the experiment is and what the data shows.

        Args:
            experiment: what experiment this is, in one sentence
            goal: what it set out to measure or show
            key_findings: the findings, each a sentence with numbers from the data
            assignment_requirements: what an assignment or brief in the folder asks for, if any
            methodology_notes: how the measurement was done, from the notes and parameters
            reference_report: path of an example or reference report in the folder, if any
        """
        if reference_report:
            try:
                reference_report = ctx.guard.relative(reference_report)
            except OutOfBounds:
                return out_of_bounds(reference_report)
        ctx.finished = ExplorationRecord(
            experiment=experiment,
            goal=goal,
            key_findings=key_findings,
            assignment_requirements=assignment_requirements or [],
            methodology_notes=methodology_notes,
            reference_report=reference_report,
        )
        return ToolResult.success({"recorded": True, "n_findings": len(key_findings)})

    tools = [list_dir, read_file, read_image, finish_exploration]
    if ctx.figures_enabled:
        tools.insert(3, make_figure)
    return tools


def _listing(fd: int) -> list[str]:
    lines: list[str] = []
    with os.scandir(fd) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            name = shown_name(entry.name)
            if len(lines) >= MAX_LISTING:
                lines.append("... (more entries not shown; list a sub-folder instead)")
                break
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:  # removed between listing and stat
                continue
            if stat.S_ISDIR(info.st_mode):
                lines.append(f"{name}/")
            elif stat.S_ISLNK(info.st_mode):
                lines.append(f"{name} (symlink)")
            elif stat.S_ISREG(info.st_mode):
                hint = " (image)" if extension(name) in IMAGE_EXTS else ""
                lines.append(f"{name}  {info.st_size} bytes{hint}")
    return lines


def _safe_rel(ctx: ExplorationContext, path: str) -> str:
    try:
        return ctx.guard.relative(path)
    except OutOfBounds:
        return str(path)
