"""Findings computed from the data itself: what was measured, ranges, trends, correlations and
peaks. Used by the offline explorer (its whole analysis) and when an exploration is cut off
(the record is then written from what had been read)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..record import FileGroupRecord, TableProfile
from .statistics import (
    checked_facts,
    class_column,
    column_sentences,
    fmt,
    numeric_columns,
    setting_column,
    table_kind,
    time_column,
)


def independent_column(frame: pd.DataFrame) -> str | None:
    """The column the others were measured against: the first numeric column that is monotonic
    (a position, time, setting), else the first numeric column."""
    columns = numeric_columns(frame)
    for column in columns:
        series = frame[column].dropna()
        if series.is_monotonic_increasing or series.is_monotonic_decreasing:
            return column
    return columns[0] if columns else None


def _fmt(value: float) -> str:
    return fmt(value)


def table_findings(path: str, frame: pd.DataFrame, profile: TableProfile | None = None) -> list[str]:
    """Findings of one table, in words, from its facts (statistics.py): each number named, with
    its file, column and the rows it covers."""
    facts, failed = checked_facts(path, frame, profile)
    columns = ", ".join(str(c) for c in frame.columns)
    if failed is None:
        try:
            return [f"{path}: columns {columns}; read as {_kind_words(frame)}.", *column_sentences(facts)]
        except Exception as error:  # a hostile table: said, never raised
            failed = f"{type(error).__name__}: {error}".splitlines()[0][:200]
    said = f"{path}: columns {columns}; its statistics could not be computed ({failed}); only its rows are counted."
    return [said, *column_sentences(facts)]


def _kind_words(frame: pd.DataFrame) -> str:
    kind = table_kind(frame)
    if kind == "time_series":
        column = time_column(frame)
        return "a time series" + (f" (time in {column})" if column else " (one column per month)")
    if kind == "categorical":
        return f"a table of classes (in {class_column(frame)})"
    if kind == "scan":
        return f"a scan (readings against {setting_column(frame)})"
    return "a table of measurements"


def cross_table_findings(frames: dict[str, pd.DataFrame]) -> list[str]:
    """Tables with the same columns are runs of one measurement: compare their peaks."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for path, frame in frames.items():
        groups.setdefault(tuple(str(c) for c in frame.columns), []).append(path)
    found = []
    for columns, paths in groups.items():
        if len(paths) < 2:
            continue
        try:
            found += _across_runs(columns, paths, frames)
        except Exception:  # a hostile table (duplicate names, odd types): no comparison, no crash
            continue
    return found


def _across_runs(columns: tuple[str, ...], paths: list[str], frames: dict[str, pd.DataFrame]) -> list[str]:
    frame0 = frames[paths[0]]
    x = independent_column(frame0)
    found: list[str] = []
    if x is None:
        return found
    for y in numeric_columns(frame0):
        if y == x:
            continue
        maxima = {p: float(frames[p][y].max()) for p in sorted(paths, key=_natural)}
        if len(set(maxima.values())) > 1:
            listing = ", ".join(f"{_label(p)}: {_fmt(v)}" for p, v in maxima.items())
            found.append(f"Across {len(paths)} runs with columns {', '.join(columns)}, the maximum {y} is {listing}.")
            found.extend(_scaling(y, maxima))
    return found


def group_findings(groups: list[FileGroupRecord], frames: dict[str, pd.DataFrame]) -> list[str]:
    """What a group of similar files is, from its samples: how many, which were read, columns."""
    found = []
    for group in groups:
        read = [p for p in group.samples if p in frames]
        text = f"{group.pattern}: {group.count} files with the same name pattern; {len(group.samples)} read as samples"
        if read:
            shapes = {tuple(str(c) for c in frames[p].columns) for p in read}
            if len(shapes) == 1:
                text += f", each with columns {', '.join(next(iter(shapes)))}"
            else:
                text += f", whose columns differ ({len(shapes)} different column sets)"
        found.append(text + ".")
    return found


_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)")


def _natural(path: str) -> tuple[str, float]:
    match = _NUMBER.search(_label(path))
    return (_NUMBER.sub("#", _label(path)), float(match.group(1)) if match else 0.0)


def _scaling(y: str, maxima: dict[str, float]) -> list[str]:
    """When run names carry a setting (scan_500mA, scan_1000mA), how the maxima scale with it."""
    settings = [_NUMBER.search(_label(p)) for p in maxima]
    if len(maxima) < 3 or any(s is None for s in settings):
        return []
    xs = np.array([float(s.group(1)) for s in settings if s])
    ys = np.array(list(maxima.values()))
    if len(set(xs.tolist())) < len(xs) or np.std(ys) == 0:
        return []
    r = float(np.corrcoef(xs, ys)[0, 1])
    unit = next((s.group(2) for s in settings if s and s.group(2)), "")
    slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1))
    if abs(r) < 0.98:
        return [f"The maximum {y} against the run setting ({unit or 'number in the file name'}): r = {r:+.4f}."]
    return [
        f"The maximum {y} scales linearly with the run setting in the file names ({unit or 'value'}): "
        f"{_fmt(slope)} per {unit or 'unit'}, intercept {_fmt(intercept)}, r = {r:+.4f}."
    ]


def _label(path: str) -> str:
    return path.rsplit("/", 1)[-1]


_HEADING = re.compile(r"^\s*#+\s*(.+?)\s*#*\s*$|^\\(?:title|section)\{(.+?)\}")


def title_of(text: str) -> str | None:
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            return (match.group(1) or match.group(2)).strip()
    return None


def section(text: str, *keywords: str) -> list[str]:
    """The lines under the first heading that mentions one of the keywords."""
    lines = text.splitlines()
    out: list[str] = []
    inside = False
    for line in lines:
        heading = _HEADING.match(line)
        if heading:
            if inside:
                break
            inside = any(k in line.lower() for k in keywords)
            continue
        if inside and line.strip():
            out.append(line.strip().lstrip("-*0123456789. ").strip())
    return [o for o in out if o]


def sentence_with(text: str, *keywords: str) -> str | None:
    """The paragraph (joined lines, up to a blank line or heading) that first mentions a keyword."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip() or _HEADING.match(line):
            if current:
                paragraphs.append(" ".join(current))
            current = []
            continue
        current.append(line.strip().lstrip("-* ").strip())
    if current:
        paragraphs.append(" ".join(current))
    for paragraph in paragraphs:
        lowered = paragraph.lower()
        if len(paragraph) > 15 and any(lowered.startswith(k) or f" {k}" in lowered for k in keywords):
            return paragraph
    return None
