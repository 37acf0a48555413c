"""The gap check: what the template and the assignment require, against what the scan and the
exploration found. Gaps go to the draft as explicit notes and to the user as events."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

from ..folder.scan import ScanResult
from ..record import ExplorationRecord
from ..templates import Template

GapKind = Literal["figures", "data", "section", "requirement", "coverage", "injection", "statistics"]

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{3,}|[\u4e00-\u9fff]{2,}")
_STOPWORDS = frozenset(
    {"this", "that", "with", "from", "have", "should", "must", "will", "report", "include", "including"}
    | {"each", "their", "there", "which", "what", "when", "where", "using", "used", "about", "into"}
    | {"also", "than", "then", "them", "they", "your", "data"}
)


class Gap(BaseModel):
    kind: GapKind
    message: str
    requirement: str | None = None


def has_material(template: Template, record: ExplorationRecord) -> bool:
    """Whether there is anything to check at all: a requirement from the template or assignment."""
    r = template.requirements
    needs = any(s.needs for s in template.sections)
    return bool(r.min_figures or r.requires_data or needs or record.assignment_requirements or record.statistics_failed)


def find_gaps(template: Template, record: ExplorationRecord, scan: ScanResult, *, figures_on: bool) -> list[Gap]:
    gaps: list[Gap] = []
    wanted = template.requirements.min_figures if figures_on else 0
    if len(record.figures) < wanted:
        gaps.append(
            Gap(
                kind="figures",
                message=f"the template asks for {wanted} figure(s); exploration made {len(record.figures)}",
            )
        )
    if template.requirements.requires_data and not record.tables and not scan.counts.get("data"):
        gaps.append(Gap(kind="data", message="the template asks for data, but no data table was found in the folder"))
    gaps += _section_gaps(template, record, scan)
    gaps += _requirement_gaps(record)
    # Members of a group of similar files stand behind its samples: the coverage table says so.
    unread = [
        e.path
        for e in record.coverage.files
        if e.status in ("unread", "skipped") and not e.reason.startswith("not read: one of")
    ]
    for found in record.suspected_injections:
        message = (
            f"suspected prompt injection in {found.path} line {found.line}: text addressing an AI assistant "
            "was treated as data (not followed, not cited)"
        )
        gaps.append(Gap(kind="injection", message=message))
    for path, error in record.statistics_failed.items():
        gaps.append(Gap(kind="statistics", message=f"the statistics of {path} could not be computed ({error})"))
    if unread:
        listed = ", ".join(unread[:5]) + (" ..." if len(unread) > 5 else "")
        when = " when the exploration was finished" if record.unread_at_finish else ""
        gaps.append(Gap(kind="coverage", message=f"{len(unread)} file(s) were not read{when}: {listed}"))
    return gaps


def _available(record: ExplorationRecord, scan: ScanResult) -> set[str]:
    have = {"files"} if scan.files else set()
    if record.goal.strip():
        have.add("goal")
    if record.methodology_notes or record.tables:
        have.add("methods")
    if record.tables:
        have.add("tables")
    if record.key_findings:
        have.add("findings")
    if record.figures:
        have.add("figures")
    return have


def _section_gaps(template: Template, record: ExplorationRecord, scan: ScanResult) -> list[Gap]:
    have = _available(record, scan)
    gaps = []
    for section in template.sections:
        missing = [need for need in section.needs if need not in have]
        if missing:
            gaps.append(
                Gap(
                    kind="section",
                    message=f"section {section.title_in('en')!r} has no material for: {', '.join(missing)}",
                    requirement=section.key,
                )
            )
    return gaps


def _requirement_gaps(record: ExplorationRecord) -> list[Gap]:
    found = " ".join(
        [record.experiment, record.goal, record.methodology_notes or "", *record.key_findings]
        + [f.caption for f in record.figures]
        + [" ".join(t.columns) for t in record.tables]
    ).lower()
    gaps = []
    for requirement in record.assignment_requirements:
        words = {w.lower() for w in _WORD.findall(requirement)} - _STOPWORDS
        if not words:
            continue
        covered = sum(1 for w in words if w in found)
        if covered / len(words) < 0.5:
            gaps.append(
                Gap(
                    kind="requirement",
                    message=f"assignment requirement not addressed by the findings: {requirement}",
                    requirement=requirement,
                )
            )
    return gaps
