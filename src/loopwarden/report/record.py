"""The structured record the exploration phase leaves for the writing phase."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

CoverageStatus = Literal["read", "partial", "skipped", "unread"]


class FigureRecord(BaseModel):
    path: str
    """Relative to the run's out_dir, e.g. figures/field_scan.png."""
    caption: str
    source_files: list[str] = Field(default_factory=list)
    code: str = ""


class TableProfile(BaseModel):
    path: str
    rows: int
    """Data rows profiled: all of them when `complete`, else the first `rows`."""
    columns: list[str]
    numeric_summary: dict[str, dict[str, float]] = Field(default_factory=dict)
    """column -> {count, mean, std, min, max, missing, ...}, over `part` of the table."""
    text_summary: dict[str, dict[str, int]] = Field(default_factory=dict)
    """text column -> {count, missing, distinct}."""
    complete: bool = True
    """True when the statistics cover every row of the file."""
    part: str = ""
    """Which part of the table the statistics cover, in words ("all 6500000 rows")."""
    sample_rows: int = 0
    """Rows held in memory for first rows, correlations and figures (the first ones)."""
    engine: str = ""
    """What computed the statistics: duckdb (out of core) or pandas."""
    dialect: dict[str, Any] = Field(default_factory=dict)
    """What was detected: delimiter, encoding, header, skipped lines, units, decimal."""
    units: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    """What the reader had to decide (skipped metadata, generated names, non-numeric cells)."""
    labels: dict[str, dict[str, str]] = Field(default_factory=dict)
    """column -> {code: name}: what a coded class column's values stand for, as the file says."""


class Description(BaseModel):
    path: str
    title: str | None = None
    """A real heading of the file; None when it has none."""
    summary: str = ""
    """The first paragraph of prose, as written."""
    goal: str | None = None
    """The first sentence that says what the data is for, as written."""
    units: dict[str, str] = Field(default_factory=dict)
    """quantity -> unit, as the file states them ("sepal length in cm")."""
    readme: bool = False


class SuspectedInjection(BaseModel):
    path: str
    line: int
    """1-based line of the text as read (a table's profile, a document's text)."""
    excerpt: str
    """The flagged line, clipped: shown as data, never as an instruction."""

    def describe(self) -> str:
        return f"{self.path} line {self.line}: {self.excerpt!r}"


class Fact(BaseModel):
    """One number computed from the data, with what it is and where it comes from."""

    path: str
    """The table it was computed from (a sheet as path#sheet)."""
    column: str
    """The column (empty for a whole-table figure such as the row count)."""
    statistic: str
    """mean, std, min, max, rows, std_of_annual_means, trend_per_year, monthly_mean, class_count,
    class_mean, correlation, slope, peak, peak_position, fwhm (statistics.py names each)."""
    value: float
    by: str | None = None
    """The rows it covers within the column: "species=Adelie", "month=7"."""
    label: str | None = None
    """What the value in `by` stands for, when the file names its codes ("class=0" is "setosa")."""
    other: str | None = None
    """The second column of a correlation, slope or peak."""
    over: str = ""
    """Which rows ("all 344 rows", "first 200000 rows")."""


class FileGroupRecord(BaseModel):
    """Files whose paths differ only in their numbers, explored through a few samples."""

    pattern: str
    count: int
    samples: list[str] = Field(default_factory=list)
    size: int = 0


class CoverageEntry(BaseModel):
    path: str
    status: CoverageStatus = "unread"
    chars_read: int = 0
    total_chars: int | None = None
    reason: str = ""


class CoverageLedger(BaseModel):
    """Which files were read, how much of each, which were skipped and why."""

    files: list[CoverageEntry] = Field(default_factory=list)

    def entry(self, path: str) -> CoverageEntry | None:
        return next((e for e in self.files if e.path == path), None)

    def by_status(self, status: CoverageStatus) -> list[str]:
        return [e.path for e in self.files if e.status == status]


class ExplorationRecord(BaseModel):
    experiment: str
    goal: str
    key_findings: list[str]
    assignment_requirements: list[str] = Field(default_factory=list)
    methodology_notes: str | None = None
    reference_report: str | None = None
    """Relative path of a reference/example report found in the data folder, if any."""
    figures: list[FigureRecord] = Field(default_factory=list)
    tables: list[TableProfile] = Field(default_factory=list)
    coverage: CoverageLedger = Field(default_factory=CoverageLedger)
    groups: list[FileGroupRecord] = Field(default_factory=list)
    """Groups of similar files (5 or more); their members that are not samples were not read."""
    offline: bool = False
    stop_reason: str = ""
    degraded: bool = False
    unread_at_finish: list[str] = Field(default_factory=list)
    """Files no tool had read when the model called finish_exploration (allowed, and said)."""
    facts: list[Fact] = Field(default_factory=list)
    """Numbers computed from the tables read, each with its file, column and statistic."""
    descriptions: list[Description] = Field(default_factory=list)
    """What the folder's description files say (README, .rst, .md, docstrings, PDFs), as written."""
    suspected_injections: list[SuspectedInjection] = Field(default_factory=list)
    """Text in the data addressing an AI assistant: flagged, never followed or cited."""
    statistics_failed: dict[str, str] = Field(default_factory=dict)
    """Tables whose statistics could not be computed: path -> the error (said, never raised)."""
