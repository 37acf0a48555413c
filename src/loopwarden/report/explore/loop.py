"""The exploration phase: a guarded tool loop over the data folder that ends with a structured
`ExplorationRecord`. A stop (the repeated-call ladder, a budget) degrades: the record is built
from what had been read and the report run goes on; under `strict` the phase fails instead."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from ...agent import Agent
from ...config import LoopConfig
from ...events import Event, EventStamper, RunFinished
from ...guard.budget import Budgets
from ...models.base import Model
from ...policy.approval import ApprovalGate
from ..approvals import DenyAll, gate_code_tools
from ..events import ExplorationCutOff, ExplorationDone, InjectionSuspected, IsolationProbed
from ..folder.groups import group_files
from ..folder.scan import ScanResult
from ..readers.attributes import link_units
from ..readers.descriptions import describe, folder_title
from ..readers.images import OcrReader
from ..readers.injection import PROMPT_RULE
from ..record import Description, ExplorationRecord, Fact
from ..sandbox.isolation import probe_isolation
from ..sandbox.runner import FigureSandbox
from .findings import cross_table_findings, table_findings
from .progress import ExploreProgress
from .statistics import checked_facts
from .tools import ExplorationContext, exploration_tools

STEP_BUDGET = 20
EXPLORE_MAX_TOKENS = 1024
"""A tool turn needs a call, not an essay: a weak model otherwise writes until the context is full."""
CUT_OFF_MESSAGE = "repeated identical tool call detected — exploration cut off, writing from what has been read"

SYSTEM_PROMPT = (
    """You are a careful data analyst. A user pointed you at a data folder whose file names and
contents are unknown to them. Work out what experiment this is, what it measured and what the data shows.
Use the tools: list folders, read every document (in segments when it is truncated), profile every table,
read the images, and draw a figure for each numeric table. Paths are relative to the data folder.
Do not repeat a call whose result you already have. When you know enough, call finish_exploration with
findings that quote numbers from the data (ranges, trends, peaks, correlations), each naming its file and
column. Take the title, background and goal from the folder's own description files (README, .rst, .md).
"""
    + PROMPT_RULE
)


def exploration_prompt(scan: ScanResult, max_files: int = 150) -> str:
    """The listing, with similar files as one line per group (read their samples, not all)."""
    groups = group_files(scan)
    sizes = {f.path: f.size for f in scan.files} if len(scan.files) <= max_files else {}
    lines = [
        f"- {g.describe()}" if g.grouped else f"- {g.paths[0]} ({g.kind}, {sizes.get(g.paths[0], g.size)} bytes)"
        for g in groups[:max_files]
    ]
    more = f"\n... and {len(groups) - max_files} more files or groups" if len(groups) > max_files else ""
    hint = (
        "\nGroups of similar files are listed once: read their samples, they stand for the group."
        if any(g.grouped for g in groups)
        else ""
    )
    listing = "\n".join(lines)
    return (
        f"The data folder holds {scan.summary()}.\nFiles:\n{listing}{more}{hint}\n\n"
        "Explore it and finish the exploration."
    )


async def explore(
    root: Path,
    out_dir: Path,
    model: Model,
    *,
    stamper: EventStamper,
    scan: ScanResult,
    strict: bool = False,
    allow_rlimits_only: bool = False,
    vision: Model | None = None,
    approve_code: bool = False,
    approvals: ApprovalGate | None = None,
) -> AsyncIterator[Event]:
    """`approve_code`: each make_figure call waits on `approvals` (denied at once without one)."""
    isolation = await asyncio.to_thread(probe_isolation)
    sandbox = FigureSandbox(root, out_dir, isolation, allow_rlimits_only=allow_rlimits_only)
    yield stamper(
        IsolationProbed,
        landlock_abi=isolation.landlock_abi,
        seccomp=isolation.seccomp,
        bwrap=isolation.bwrap is not None,
        layer=sandbox.layer,
        figures_enabled=sandbox.enabled,
        message=_isolation_message(isolation.describe(), sandbox),
    )
    ocr = OcrReader() if vision is None and OcrReader.available() else None
    ctx = ExplorationContext(root=root, out_dir=out_dir, scan=scan, sandbox=sandbox, vision=vision, ocr=ocr)
    bind = getattr(model, "bind", None)
    if callable(bind):
        bind(ctx)  # the offline explorer plans from the scan and analyses what the tools read
    config = LoopConfig(
        budgets=Budgets(max_tool_rounds=STEP_BUDGET, max_model_calls=STEP_BUDGET + 5),
        policy="fail" if strict else "degrade",
        wrap_up=False,
        phase="exploration",
        max_output_tokens=EXPLORE_MAX_TOKENS,
    )
    if approve_code and approvals is None:
        approvals = DenyAll()  # without a gate the agent would pause, and a report run cannot resume
    tools = gate_code_tools(exploration_tools(ctx), approve_code)
    agent = Agent(model, tools, system=SYSTEM_PROMPT, config=config, approvals=approvals)
    finished: RunFinished | None = None
    progress = ExploreProgress(ctx, stamper)
    yield progress.start()
    flagged = 0
    async for event in agent.stream(exploration_prompt(scan), stamper=stamper):
        if isinstance(event, RunFinished):
            finished = event
        yield event
        if (step := progress.after(event)) is not None:
            yield step
        for found in ctx.injections[flagged:]:
            message = f"suspected prompt injection in {found.path}: treated as data, not followed"
            yield stamper(InjectionSuspected, path=found.path, line=found.line, excerpt=found.excerpt, message=message)
        flagged = len(ctx.injections)
    stop_reason = finished.stop_reason if finished else "no_result"
    groups = ctx.group_records()
    ctx.coverage.note_groups(groups)
    ctx.coverage.note_scan_skips(scan)
    facts = await asyncio.to_thread(all_facts, ctx)  # before the ledger: a failure is noted in it
    described = descriptions(ctx)
    ledger = ctx.coverage.ledger()
    unread = ledger.by_status("unread")
    if ctx.finished is not None:
        record = ctx.finished.model_copy(update={"unread_at_finish": unread})
        read_any = bool(ledger.by_status("read") or ledger.by_status("partial"))
        # Finishing with files unread is allowed (and said in the gaps and the Methods); finishing
        # having read nothing at all leaves findings with nothing under them.
        degraded = bool(ledger.files) and not read_any
        if degraded:
            stop_reason = "finished_without_reading"
            message = (
                f"finish_exploration was called with 0 of {len(ledger.files)} files read — "
                "its findings rest on no file; writing from the scan"
            )
            yield stamper(ExplorationCutOff, stop_reason=stop_reason, message=message, strict=strict)
    else:
        record = fallback_record(ctx)
        if finished is not None and isinstance(finished.output, str) and finished.output.strip():
            # The model answered in text instead of finishing: keep its words, marked as such.
            summary = f"The model's own summary (not checked against the data): {finished.output.strip()[:2000]}"
            record = record.model_copy(update={"key_findings": [*record.key_findings, summary]})
        degraded = True
        yield stamper(ExplorationCutOff, stop_reason=stop_reason, message=_cut_off_message(stop_reason, strict),
                      strict=strict)  # fmt: skip
    record = record.model_copy(
        update={
            "figures": sorted(ctx.figures, key=lambda f: f.path),
            "tables": [link_units(ctx.tables[path], described) for path in sorted(ctx.tables)],
            "coverage": ledger,
            "groups": groups,
            "offline": bool(getattr(model, "offline", False)),
            "stop_reason": stop_reason,
            "degraded": degraded,
            "facts": facts,
            "statistics_failed": dict(ctx.statistics_failed),
            "descriptions": described,
            "suspected_injections": list(ctx.injections),
        }
    )
    await asyncio.to_thread(_save_record, out_dir, record)
    yield stamper(ExplorationDone, record=record, failed=degraded and strict)


def _isolation_message(described: str, sandbox: FigureSandbox) -> str:
    if sandbox.layer == "rlimits-only":
        return f"{described}; figures run with resource limits only (explicitly allowed)"
    if not sandbox.enabled:
        return f"{described}; the figure step is switched off (pass allow_rlimits_only to run it without isolation)"
    return described


def _cut_off_message(stop_reason: str, strict: bool) -> str:
    base = CUT_OFF_MESSAGE if stop_reason == "repeated_call" else (
        f"exploration stopped ({stop_reason}) before finish_exploration — writing from what has been read"
    )  # fmt: skip
    return base + (" (strict: the run fails)" if strict else "")


def all_facts(ctx: ExplorationContext) -> list[Fact]:
    """The facts of every table read; a table whose statistics fail keeps its row count, and the
    failure is noted in the coverage ledger and `ctx.statistics_failed` (never raised)."""
    facts: list[Fact] = []
    for path, frame in ctx.frames().items():
        found, failed = checked_facts(path, frame, ctx.tables.get(path))
        facts += found
        if failed is not None:
            ctx.statistics_failed[path] = failed
            ctx.coverage.note_statistics_failed(path.split("#")[0], failed)
    return facts


def descriptions(ctx: ExplorationContext) -> list[Description]:
    """What the description files read say about the folder (documents, not image readings)."""
    images = {f.path for f in ctx.scan.files if f.kind == "images"}
    texts = sorted((p, t) for p, t in ctx.texts.items() if p not in images and p not in ctx.tables)
    return [d for path, text in texts if (d := describe(path, text)) is not None]


def fallback_record(ctx: ExplorationContext) -> ExplorationRecord:
    """The record when the model never finished: built from the tables and texts the tools read."""
    frames = ctx.frames()
    findings = [f for path, frame in frames.items() for f in table_findings(path, frame, ctx.tables.get(path))]
    findings += cross_table_findings(frames)
    read = ctx.coverage.ledger()
    title = folder_title(descriptions(ctx))
    if not findings:
        findings = [f"Files read before the cut-off: {', '.join(read.by_status('read')) or 'none'}."]
    return ExplorationRecord(
        experiment=title or f"Unidentified experiment in {ctx.root.name} (exploration cut off)",
        goal="Not established: the exploration was cut off before it finished.",
        key_findings=findings,
    )


def _save_record(out_dir: Path, record: ExplorationRecord) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "exploration.json").write_text(json.dumps(record.model_dump(mode="json"), indent=1, ensure_ascii=False))
