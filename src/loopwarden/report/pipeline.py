"""`loopwarden report`: the whole report run as one stream of events.

scan → explore → [figures] → [gap] → draft → reflect×N → bib → [compile]

The milestones are planned before anything runs (`plan_pipeline`), each carries its index, the
fixed total and its stage name, and `report_finished` is always the last event. Bad input at run
time does not raise: the run ends with a failed `report_finished`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..events import Event, EventStamper, RunFinished, Totals
from ..models.base import Model
from ..policy.approval import ApprovalGate
from .config import ReportConfig, ReportInputError, validate_report_config
from .events import Milestone, ReportFinished, ReportStatus
from .plan import Stage, Toolchain, plan_stages, probe_toolchain
from .record import ExplorationRecord
from .stages import Context, run_stage
from .templates import TemplateError, load_template

__all__ = [
    "ReportConfig",
    "ReportInputError",
    "ReportModels",
    "Stage",
    "plan_pipeline",
    "run_report",
    "validate_report_config",
]


@dataclass
class ReportModels:
    """Models to use instead of the configured endpoint (tests, embedding applications)."""

    explorer: Model | None = None
    writer: Model | None = None
    """Drafts, reviews and repairs; None (with no endpoint) = the deterministic offline writer."""
    vision: Model | None = None


def plan_pipeline(config: ReportConfig, *, xelatex: bool) -> list[Stage]:
    """The milestones of a run, from configuration alone."""
    return plan_stages(load_template(config.template), xelatex=xelatex and config.pdf)


async def run_report(
    config: ReportConfig,
    *,
    run_id: str | None = None,
    start_seq: int = 0,
    models: ReportModels | None = None,
    exploration: ExplorationRecord | None = None,
    toolchain: Toolchain | None = None,
    approvals: ApprovalGate | None = None,
) -> AsyncIterator[Event]:
    """Run the report pipeline; `exploration` reuses a saved record instead of exploring again.
    `toolchain` overrides the one probe for LaTeX tools (tests: pretend xelatex is missing).
    `approvals` decides the make_figure calls of a `config.approve_code` run (approvals.py)."""
    stamp = EventStamper(run_id or uuid.uuid4().hex, start_seq)
    started = time.monotonic()
    try:
        validate_report_config(config)
        tools = toolchain or probe_toolchain(config.pdf)
        template = load_template(config.template)
        stages = plan_stages(template, xelatex=tools.can_compile and config.pdf)  # = plan_pipeline, one load
        config.out_dir.mkdir(parents=True, exist_ok=True)
        ctx = Context(config, stamp, tools, template, models or ReportModels(), exploration, approvals=approvals)
        log = (config.out_dir / "events.jsonl").open("w", encoding="utf-8")
    except (ReportInputError, TemplateError, OSError) as error:
        message = error.message if isinstance(error, ReportInputError) else f"cannot start: {error}"
        yield stamp(ReportFinished, status="failed", stop_reasons=["bad_input"], message=message)
        return
    with log:
        try:
            async for event in _run_stages(ctx, stages):
                yield _logged(log, event)
        except asyncio.CancelledError:
            _logged(log, _finished(ctx, started, "cancelled", "the run was cancelled"))
            raise
        except Exception as error:  # a bug must still end the stream with a clear event
            message = f"internal error: {type(error).__name__}: {error}"
            yield _logged(log, _finished(ctx, started, "failed", message, reason="internal_error"))
            return
        if not config.data_dir.is_dir():  # deleted or unmounted while the run went on
            ctx.notes.append("the data folder vanished during the run: the report holds only what was read before")
            ctx.stop_reasons.append("data_folder_vanished")
        yield _logged(log, _finished(ctx, started, *ctx.final_status()))


async def _run_stages(ctx: Context, stages: list[Stage]) -> AsyncIterator[Event]:
    total = len(stages)
    plan = _plan_detail(ctx, stages)
    for stage in stages:
        skip = ctx.skip_reason(stage)
        if skip is not None:
            yield ctx.stamp(
                Milestone,
                index=stage.index,
                total=total,
                stage=stage.name,
                state="skipped",
                detail={"label": stage.label, "reason": skip},
            )
            continue
        start_detail = {"label": stage.label, **(plan if stage.index == 1 else {})}
        yield ctx.stamp(
            Milestone, index=stage.index, total=total, stage=stage.name, state="started", detail=start_detail
        )
        detail: dict[str, Any] = {"label": stage.label}
        async for event in run_stage(ctx, stage, detail):
            if isinstance(event, RunFinished):
                ctx.add_totals(event.totals)
            yield event
        state = "skipped" if detail.get("reason") else "done"
        yield ctx.stamp(Milestone, index=stage.index, total=total, stage=stage.name, state=state, detail=detail)


def _plan_detail(ctx: Context, stages: list[Stage]) -> dict[str, Any]:
    """The whole plan, told with the first milestone: what will run and whether a PDF will come."""
    if not ctx.config.pdf or not ctx.template.steps.compile:
        deliverable = "report.tex (PDF switched off)"
    elif ctx.tools.can_compile:
        deliverable = "report.pdf (xelatex found)"
    else:
        deliverable = "report.tex (xelatex not found: no PDF)"
    return {"plan": [s.label for s in stages], "deliverable": deliverable, "template": ctx.template.name}


def _finished(ctx: Context, started: float, status: ReportStatus, message: str, reason: str | None = None) -> Event:
    totals: Totals = ctx.totals()
    totals.duration_s = time.monotonic() - started
    reasons = ctx.stop_reasons + ([reason] if reason else [])
    return ctx.stamp(
        ReportFinished,
        status=status,
        stop_reasons=reasons,
        totals=totals,
        outputs=ctx.outputs(),
        message=message,
        coverage=ctx.coverage(),
        coverage_notes=ctx.coverage_notes(),
        suspected_injections=ctx.suspected_injections(),
    )


def _logged(log: TextIO, event: Event) -> Event:
    log.write(event.to_json() + "\n")
    log.flush()
    return event


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
