"""Profiling tables (CSV/TSV/XLSX): shape, columns, per-column statistics, first rows.

A table is read through pandas from an already opened descriptor (the path guard's), and the
profile is what the model reads instead of raw rows: a 10,000-row CSV becomes a page of text.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pandas as pd

from ..record import TableProfile

MAX_ROWS = 200_000
"""Rows profiled per table; a note says when a table was longer."""
MAX_XLSX_BYTES = 50 << 20
DELIMITERS = ",;\t|"


@dataclass
class TableRead:
    profiles: list[TableProfile]
    text: str
    comments: list[str] = field(default_factory=list)
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)


def read_delimited(f: BinaryIO, rel: str, ext: str) -> TableRead:
    head = f.read(64 * 1024).decode("utf-8", errors="replace")
    f.seek(0)
    lines = head.splitlines()
    comments = []
    for line in lines:
        if not line.startswith("#"):
            break
        comments.append(line.lstrip("#").strip())
    sample = "\n".join(lines[len(comments) : len(comments) + 20])
    sep = "\t" if ext == "tsv" else _sniff(sample)
    frame = pd.read_csv(
        f, sep=sep, skiprows=len(comments), nrows=MAX_ROWS, encoding_errors="replace", skipinitialspace=True
    )
    frame.columns = [str(c).strip() for c in frame.columns]
    profile = profile_frame(rel, frame)
    text = describe(rel, frame, profile, comments=comments, note=f"delimiter {sep!r}")
    return TableRead(profiles=[profile], text=text, comments=comments, frames={rel: frame})


def read_excel(f: BinaryIO, rel: str) -> TableRead:
    data = f.read(MAX_XLSX_BYTES + 1)
    if len(data) > MAX_XLSX_BYTES:
        raise ValueError(f"workbook larger than {MAX_XLSX_BYTES >> 20} MB; not profiled")
    sheets: dict[str, pd.DataFrame] = pd.read_excel(io.BytesIO(data), sheet_name=None, nrows=MAX_ROWS)
    profiles, texts, frames = [], [], {}
    for name, frame in sheets.items():
        frame.columns = [str(c).strip() for c in frame.columns]
        key = f"{rel}#{name}" if len(sheets) > 1 else rel
        profile = profile_frame(key, frame)
        profiles.append(profile)
        frames[key] = frame
        texts.append(describe(key, frame, profile, note=f"sheet {name!r}"))
    return TableRead(profiles=profiles, text="\n\n".join(texts), frames=frames)


def _sniff(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        return ","


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def profile_frame(path: str, frame: pd.DataFrame) -> TableProfile:
    summary: dict[str, dict[str, float]] = {}
    for column in frame.select_dtypes("number").columns:
        series = frame[column].dropna()
        if series.empty:
            continue
        stats = {
            "count": float(series.count()),
            "mean": series.mean(),
            "std": series.std() if len(series) > 1 else 0.0,
            "min": series.min(),
            "max": series.max(),
            "argmax_row": float(series.idxmax()) if isinstance(series.idxmax(), int) else float("nan"),
        }
        clean = {k: f for k, v in stats.items() if (f := _finite(v)) is not None}
        summary[str(column)] = clean
    return TableProfile(path=path, rows=len(frame), columns=[str(c) for c in frame.columns], numeric_summary=summary)


def correlations(frame: pd.DataFrame, top: int = 5) -> list[tuple[str, str, float]]:
    numeric = frame.select_dtypes("number")
    numeric = numeric.loc[:, numeric.nunique() > 1]
    if numeric.shape[1] < 2:
        return []
    matrix = numeric.corr()
    pairs = []
    columns = list(matrix.columns)
    for i, a in enumerate(columns):
        for b in columns[i + 1 :]:
            value = _finite(matrix.loc[a, b])
            if value is not None:
                pairs.append((str(a), str(b), value))
    pairs.sort(key=lambda p: -abs(p[2]))
    return pairs[:top]


def describe(
    path: str, frame: pd.DataFrame, profile: TableProfile, *, comments: list[str] | None = None, note: str = ""
) -> str:
    lines = [f"Table {path}: {profile.rows} rows x {len(profile.columns)} columns ({note})"]
    if profile.rows >= MAX_ROWS:
        lines.append(f"(only the first {MAX_ROWS} rows were profiled)")
    if comments:
        lines.append("Header comments: " + " | ".join(comments))
    lines.append("Columns:")
    for column in frame.columns:
        stats = profile.numeric_summary.get(str(column))
        missing = int(frame[column].isna().sum())
        if stats:
            parts = ", ".join(f"{k} {v:.6g}" for k, v in stats.items() if k != "argmax_row")
            lines.append(f"- {column} ({frame[column].dtype}): {parts}; {missing} missing")
        else:
            distinct = frame[column].nunique()
            top = frame[column].mode()
            top_text = f", most common {str(top.iloc[0])!r}" if not top.empty else ""
            lines.append(f"- {column} ({frame[column].dtype}): {distinct} distinct{top_text}; {missing} missing")
    pairs = correlations(frame)
    if pairs:
        lines.append("Strongest correlations: " + "; ".join(f"{a}~{b} r={r:+.3f}" for a, b, r in pairs))
    lines.append("First rows:")
    lines.append(frame.head(5).to_string(max_colwidth=40))
    return "\n".join(lines)
