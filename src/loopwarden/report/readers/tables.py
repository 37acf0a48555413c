"""Profiling tables (CSV/TSV/XLSX): what was detected, shape, columns, statistics, first rows.

A delimited file is read as its dialect says (`dialect.detect`: delimiter, encoding, lines above
the table, header or generated names, units row, decimal comma); the statistics cover every row
of the file (`profile.profile_whole`, out of core), and the first `SAMPLE_ROWS` rows are kept as a
frame for the first rows, correlations, findings and figures. The profile says which part each
number comes from. The model reads this profile instead of raw rows.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pandas as pd

from ..record import TableProfile
from .attributes import Naming, class_labels
from .dialect import Dialect, detect, unique_names
from .profile import PROFILE_SECONDS, ColumnStats, NotATable, WholeProfile, profile_whole, text_stream

SAMPLE_ROWS = 200_000
"""Rows kept in memory per table (first rows, correlations, figures); statistics use them all."""
HEAD_BYTES = 256 * 1024
MAX_XLSX_BYTES = 50 << 20


@dataclass
class TableRead:
    profiles: list[TableProfile]
    text: str
    comments: list[str] = field(default_factory=list)
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    """The first SAMPLE_ROWS rows of each table (all of it when it is shorter)."""
    read_bytes: int | None = None
    """Bytes the statistics cover, when they stopped before the end of the file."""


def read_delimited(
    f: BinaryIO,
    rel: str,
    ext: str,
    *,
    size: int,
    seconds: float = PROFILE_SECONDS,
    namer: Callable[[int], Naming | None] | None = None,
) -> TableRead:
    """`namer(width)`: column names for a table without a header row, from a description file."""
    head = f.read(HEAD_BYTES)
    if b"\x00" in head[:8192]:
        raise NotATable("NUL bytes in the first block: a binary file, not a table")
    if len(head) == HEAD_BYTES and b"\n" not in head and b"\r" not in head:
        raise NotATable(f"no line break in the first {HEAD_BYTES >> 10} KB: not a table")
    dialect = detect(head, complete=len(head) < HEAD_BYTES)
    if ext == "tsv" and dialect.delimiter != "\t":
        dialect.notes.append(f"a .tsv file delimited by {dialect.delimiter!r}, not tabs")
    if not dialect.header and namer is not None:
        _name_from_description(dialect, namer)
    frame = _sample_frame(f, dialect)
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) for c in frame.columns]
    whole = profile_whole(f, dialect, numeric, size=size, seconds=seconds)
    profile = _profile(rel, frame, whole, dialect, size)
    _name_classes(profile, frame, dialect)
    comments = [line.lstrip("#%/ ").strip() for line in dialect.preamble if line.lstrip().startswith(("#", "%", "//"))]
    text = describe(rel, frame, profile, comments=comments, note=dialect.describe())
    return TableRead(profiles=[profile], text=text, comments=comments, frames={rel: frame}, read_bytes=whole.bytes_read)


def _name_from_description(dialect: Dialect, namer: Callable[[int], Naming | None]) -> None:
    try:
        naming = namer(dialect.width)
    except Exception:  # naming is a courtesy: an unreadable description leaves generated names
        return
    if naming is None:
        return
    dialect.notes.append(naming.note)
    if naming.names:
        dialect.columns = list(naming.names)
        dialect.units.update(naming.units)
        dialect.names_from = naming.source


def _name_classes(profile: TableProfile, frame: pd.DataFrame, dialect: Dialect) -> None:
    """A coded class column named by the file's own metadata row (attributes.class_labels)."""
    if dialect.header or not profile.complete or frame.empty or len(frame) < profile.rows:
        return
    last = profile.columns[-1]
    codes = frame[last].dropna()
    if not pd.api.types.is_integer_dtype(codes):
        return
    labels = class_labels(dialect.preamble, dialect.delimiter, profile.columns, profile.rows, set(codes.astype(str)))
    if labels:
        profile.labels[last] = labels
        named = ", ".join(f"{code} = {name}" for code, name in labels.items())
        profile.notes.append(f"the skipped first row names the values of {last}: {named} (its counts match the table)")


def _sample_frame(f: BinaryIO, dialect: Dialect) -> pd.DataFrame:
    stream, _ = text_stream(f, dialect)
    frame = pd.read_csv(
        stream,
        sep=dialect.delimiter,
        quotechar=dialect.quotechar,
        decimal=dialect.decimal,
        header=None,
        names=dialect.columns,
        index_col=False,
        skipinitialspace=dialect.delimiter == " ",
        on_bad_lines="skip",
        nrows=SAMPLE_ROWS,
        engine="c",
    )
    return frame


def read_spec(profile: TableProfile) -> dict[str, Any] | None:
    """How figure code should read a delimited table to see what its profile saw (None for a
    spreadsheet): the sandbox's `load(path)` uses it."""
    d = profile.dialect
    if "skip_lines" not in d or "#" in profile.path:
        return None
    return {"sep": d["delimiter"], "quotechar": d["quotechar"], "decimal": d["decimal"], "codec": d["codec"],
            "skip_lines": d["skip_lines"], "names": list(profile.columns)}  # fmt: skip


def read_excel(f: BinaryIO, rel: str) -> TableRead:
    data = f.read(MAX_XLSX_BYTES + 1)
    if len(data) > MAX_XLSX_BYTES:
        raise ValueError(f"workbook larger than {MAX_XLSX_BYTES >> 20} MB; not profiled")
    sheets: dict[str, pd.DataFrame] = pd.read_excel(io.BytesIO(data), sheet_name=None, nrows=SAMPLE_ROWS)
    profiles, texts, frames = [], [], {}
    for name, frame in sheets.items():
        frame.columns = unique_names([str(c).strip() for c in frame.columns])  # "t" and "t " stay two columns
        key = f"{rel}#{name}" if len(sheets) > 1 else rel
        profile = profile_frame(key, frame)
        profiles.append(profile)
        frames[key] = frame
        texts.append(describe(key, frame, profile, note=f"sheet {name!r}"))
    return TableRead(profiles=profiles, text="\n\n".join(texts), frames=frames)


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _summary(stats: dict[str, ColumnStats]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for column, s in stats.items():
        if not s.numeric or s.count == 0:
            continue
        values = {"count": s.count, "mean": s.mean, "std": s.std, "min": s.min, "max": s.max, "missing": s.missing}
        if s.non_numeric:
            values["non_numeric"] = s.non_numeric
        out[column] = {k: f for k, v in values.items() if (f := _finite(v)) is not None}
    return out


def _profile(rel: str, frame: pd.DataFrame, whole: WholeProfile, dialect: Dialect, size: int) -> TableProfile:
    notes = list(dialect.notes) + whole.notes
    for column, s in whole.columns.items():
        if s.non_numeric:
            notes.append(f"{column}: {s.non_numeric} cell(s) are not numbers; left out of its statistics")
    if whole.complete:
        part = f"all {whole.rows} rows"
    else:
        share = f" ({100 * whole.bytes_read / max(size, 1):.0f}% of the file's bytes)" if whole.bytes_read else ""
        part = f"the first {whole.rows} rows{share}"
    return TableProfile(
        path=rel,
        rows=whole.rows,
        columns=list(dialect.columns),
        numeric_summary=_summary(whole.columns),
        text_summary={
            c: {"count": s.count, "missing": s.missing, "distinct": s.distinct or 0}
            for c, s in whole.columns.items()
            if not s.numeric
        },
        complete=whole.complete,
        part=part,
        sample_rows=len(frame),
        engine=whole.engine,
        dialect=dialect.as_dict(),
        units=dict(dialect.units),
        notes=notes,
    )


def profile_frame(path: str, frame: pd.DataFrame) -> TableProfile:
    """A profile of a frame held whole (a spreadsheet sheet)."""
    stats: dict[str, ColumnStats] = {}
    for column in frame.columns:
        series = frame[column]
        numeric = pd.api.types.is_numeric_dtype(series)
        s = ColumnStats(numeric, missing=int(series.isna().sum()))
        values = series.dropna()
        if numeric and len(values):
            mean = float(values.mean())
            s.merge(len(values), mean, float(((values - mean) ** 2).sum()), float(values.min()), float(values.max()))
        elif not numeric:
            s.count, s.distinct = len(values), int(values.nunique())
        stats[str(column)] = s
    whole = WholeProfile(rows=len(frame), columns=stats, complete=len(frame) < SAMPLE_ROWS, engine="pandas")
    profile = TableProfile(
        path=path,
        rows=len(frame),
        columns=[str(c) for c in frame.columns],
        numeric_summary=_summary(stats),
        text_summary={
            c: {"count": s.count, "missing": s.missing, "distinct": s.distinct or 0}
            for c, s in stats.items()
            if not s.numeric
        },
        complete=whole.complete,
        part=f"all {len(frame)} rows" if whole.complete else f"the first {len(frame)} rows",
        sample_rows=len(frame),
        engine="pandas",
    )
    return profile


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
    lines.append(
        f"Statistics are of {profile.part}" + (f" (read with {profile.engine})" if profile.engine else "") + "."
    )
    if profile.sample_rows < profile.rows:
        lines.append(f"First rows, correlations and figures use the first {profile.sample_rows} rows.")
    if comments:
        lines.append("Header comments: " + " | ".join(comments))
    for extra in profile.notes:
        lines.append(f"Note: {extra}")
    if profile.units:
        lines.append("Units: " + ", ".join(f"{c} [{u}]" for c, u in profile.units.items()))
    lines.append("Columns:")
    for column in profile.columns:
        stats = profile.numeric_summary.get(column)
        if stats:
            parts = ", ".join(f"{k} {v:.6g}" for k, v in stats.items())
            lines.append(f"- {column} (number): {parts}")
            continue
        text = profile.text_summary.get(column)
        top = frame[column].mode() if column in frame.columns else pd.Series(dtype=object)
        top_text = f", most common in the first rows {str(top.iloc[0])!r}" if not top.empty else ""
        if text:
            lines.append(f"- {column} (text): {text['distinct']} distinct{top_text}; {text['missing']} missing")
        else:
            lines.append(f"- {column}: no values")
    pairs = correlations(frame)
    if pairs:
        lines.append("Strongest correlations: " + "; ".join(f"{a}~{b} r={r:+.3f}" for a, b, r in pairs))
    lines.append("First rows:")
    lines.append(frame.head(5).to_string(max_colwidth=40))
    return "\n".join(lines)
