"""Report-run events: subclasses of `loopwarden.events.Event`; `parse_report_event` reads them
back (with the runtime's). Each part of the report agent adds the classes it needs here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ..events import Event, Totals, parse_event
from .record import ExplorationRecord

MilestoneState = Literal["started", "done", "skipped"]
ReportStatus = Literal["completed", "degraded", "failed", "cancelled"]


class Milestone(Event):
    type: Literal["milestone"] = "milestone"
    index: int
    total: int
    stage: str
    state: MilestoneState
    detail: dict[str, Any] = Field(default_factory=dict)


class StageProgress(Event):
    """Progress inside a stage, between its milestones: files read of the planned set (a group
    of similar files counts its samples), figures made. The plan's stage count is unchanged."""

    type: Literal["stage_progress"] = "stage_progress"
    stage: str
    files_read: int = 0
    files_planned: int = 0
    figures_made: int = 0


class ScanDone(Event):
    """The zero-LLM scan of the data folder; `scan` is a `ScanResult` dump."""

    type: Literal["scan_done"] = "scan_done"
    scan: dict[str, Any]


class IsolationProbed(Event):
    """Which OS isolation layers the figure sandbox found; whether figures are on."""

    type: Literal["isolation_probed"] = "isolation_probed"
    landlock_abi: int | None = None
    seccomp: bool = False
    bwrap: bool = False
    layer: str | None = None
    figures_enabled: bool = False
    message: str = ""


class ExplorationCutOff(Event):
    """The exploration phase was stopped by a detector or budget; the run goes on (or fails
    under --strict) with what was read."""

    type: Literal["exploration_cut_off"] = "exploration_cut_off"
    stop_reason: str
    message: str
    strict: bool = False


class FigureMade(Event):
    type: Literal["figure_made"] = "figure_made"
    path: str
    caption: str
    ok: bool = True
    message: str = ""


class ExplorationDone(Event):
    type: Literal["exploration_done"] = "exploration_done"
    record: ExplorationRecord
    failed: bool = False
    """True when the phase was cut off under --strict: the report run must fail."""


class InjectionSuspected(Event):
    """Text in a file of the folder addresses an AI assistant ("ignore your previous
    instructions ..."): it is treated as data, never followed or cited, and flagged in the report."""

    type: Literal["injection_suspected"] = "injection_suspected"
    path: str
    line: int
    excerpt: str
    message: str


class GapFound(Event):
    """Something the template or the assignment requires that the material does not give."""

    type: Literal["gap_found"] = "gap_found"
    kind: str
    message: str
    requirement: str | None = None


class DraftRejected(Event):
    """A draft (or revision, or repair) that was not accepted; a retry follows if any are left."""

    type: Literal["draft_rejected"] = "draft_rejected"
    stage: str
    attempt: int
    max_attempts: int
    problem: str


class DraftFailed(Event):
    """No acceptable draft after every attempt; `fallback` says what the run used instead."""

    type: Literal["draft_failed"] = "draft_failed"
    stage: str
    attempts: int
    problems: list[str]
    fallback: str
    message: str


class ReflectionVerdict(Event):
    type: Literal["reflection_verdict"] = "reflection_verdict"
    round: int
    major_issues: list[str] = Field(default_factory=list)
    minor_issues: list[str] = Field(default_factory=list)
    done: bool = False
    change: float | None = None
    """Fraction of the text the revision changed; None when no revision was made."""
    outcome: str = ""
    """continue | converged_done | converged_unchanged | verdict_unreadable | model_error | revision_rejected."""


class CitationsRemoved(Event):
    """Cite keys that named no real source; they were removed from the text."""

    type: Literal["citations_removed"] = "citations_removed"
    keys: list[str]
    message: str


class CompileError(Event):
    """An xelatex failure, from its log; the last good PDF (if any) is kept."""

    type: Literal["compile_error"] = "compile_error"
    attempt: int
    message: str
    line: int | None = None
    context: str = ""
    pass_name: str = "xelatex"
    kept_pdf: bool = False
    will_repair: bool = False


class ReportFinished(Event):
    """The LAST event of every report run, success or not."""

    type: Literal["report_finished"] = "report_finished"
    status: ReportStatus
    stop_reasons: list[str] = Field(default_factory=list)
    totals: Totals = Field(default_factory=Totals)
    outputs: dict[str, str] = Field(default_factory=dict)
    message: str = ""
    coverage: dict[str, int] = Field(default_factory=dict)
    """Files of the data folder by coverage status (read, partial, skipped, unread)."""
    coverage_notes: list[str] = Field(default_factory=list)
    """Files not read in full and why (skipped, binary, partial, unreadable; groups read by samples)."""
    suspected_injections: list[str] = Field(default_factory=list)
    """Text in the data addressing an AI assistant (path, line, excerpt): flagged, never followed."""


REPORT_EVENTS: tuple[type[Event], ...] = (
    Milestone,
    StageProgress,
    ScanDone,
    IsolationProbed,
    ExplorationCutOff,
    FigureMade,
    ExplorationDone,
    InjectionSuspected,
    GapFound,
    DraftRejected,
    DraftFailed,
    ReflectionVerdict,
    CitationsRemoved,
    CompileError,
    ReportFinished,
)

parse_report_event = parse_event.with_classes(REPORT_EVENTS)
"""Reads a report run's events back: the runtime's and the report agent's, each into its class."""
