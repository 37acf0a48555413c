"""Whole-file column statistics of a delimited table, out of core, in bounded memory and time.

DuckDB streams the file (opened through the path guard's descriptor, never by name) and keeps
only the aggregates: count, mean, standard deviation, minimum and maximum of each numeric column,
missing and non-numeric values, distinct values of text columns. Without DuckDB, or for a file it
cannot decode (Windows-1252, stray bytes further down), pandas reads the file in chunks of
`CHUNK_ROWS` rows and the same aggregates are merged chunk by chunk (Chan's parallel algorithm),
with the same meaning cell for cell: both read every cell as text and cast it the same way.

Memory: DuckDB runs under `MEMORY_LIMIT` with `THREADS` threads; the pandas path holds one chunk,
and refuses a line longer than `MAX_LINE_BYTES`. Time: both stop at the deadline and say how far
they got; the statistics are then of the first `rows` rows, and `complete` is False.
"""

from __future__ import annotations

import io
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from .dialect import Dialect

CHUNK_ROWS = 100_000
MAX_LINE_BYTES = 4 << 20
MEMORY_LIMIT = "256MB"
THREADS = 2
PROFILE_SECONDS = 120.0
DUCKDB_MIN_BYTES = 4 << 20
"""Smaller files are read by pandas in one chunk: starting DuckDB would cost more than reading."""
NA_VALUES = ("", "na", "n/a", "nan", "null", "none", "#n/a", "<na>", "-nan", "nat")


@dataclass
class ColumnStats:
    numeric: bool
    count: int = 0
    """Non-missing values (numbers, for a numeric column)."""
    missing: int = 0
    non_numeric: int = 0
    """Cells of a numeric column that are neither numbers nor missing (left out of the statistics)."""
    mean: float = math.nan
    m2: float = 0.0
    min: float = math.nan
    max: float = math.nan
    distinct: int | None = None

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 0.0

    def merge(self, count: int, mean: float, m2: float, lo: float, hi: float) -> None:
        if count == 0:
            return
        if self.count == 0:
            self.count, self.mean, self.m2, self.min, self.max = count, mean, m2, lo, hi
            return
        total = self.count + count
        delta = mean - self.mean
        self.mean += delta * count / total
        self.m2 += m2 + delta * delta * self.count * count / total
        self.count = total
        self.min, self.max = min(self.min, lo), max(self.max, hi)


@dataclass
class WholeProfile:
    rows: int
    columns: dict[str, ColumnStats]
    complete: bool
    engine: str
    bytes_read: int | None = None
    """How far into the file a partial profile got (None when unknown)."""
    notes: list[str] = field(default_factory=list)


class NotATable(ValueError):
    """The file is not a delimited table (binary, no line breaks): shown another way."""


class LineTooLong(NotATable):
    pass


class _Bounded(io.RawIOBase):
    """A raw reader over a descriptor from an offset that refuses a line beyond MAX_LINE_BYTES:
    a sparse file of NUL bytes or a one-line gigabyte never reaches the parser whole."""

    def __init__(self, f: BinaryIO, offset: int) -> None:
        self._f = f
        self._f.seek(offset)
        self._since_newline = 0
        self.position = offset

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._f.read(min(len(buffer), 1 << 20))
        n = len(data)
        buffer[:n] = data
        self.position += n
        last = data.rfind(b"\n")
        self._since_newline = n - last - 1 if last >= 0 else self._since_newline + n
        if self._since_newline > MAX_LINE_BYTES:
            raise LineTooLong(f"a line longer than {MAX_LINE_BYTES >> 20} MB: not read as a table")
        return n


def text_stream(f: BinaryIO, dialect: Dialect, offset: int | None = None) -> tuple[io.TextIOWrapper, _Bounded]:
    raw = _Bounded(f, dialect.data_offset if offset is None else offset)
    codec = "utf-8" if dialect.encoding == "utf-8-sig" else dialect.encoding
    stream = io.TextIOWrapper(io.BufferedReader(raw, 1 << 20), encoding=codec, errors=dialect.errors, newline="")
    return stream, raw


def profile_whole(
    f: BinaryIO, dialect: Dialect, numeric: list[bool], *, size: int, seconds: float = PROFILE_SECONDS
) -> WholeProfile:
    """Statistics of every row of the table; `numeric[i]` says which columns are numbers."""
    deadline = time.monotonic() + seconds
    notes: list[str] = []
    if size >= DUCKDB_MIN_BYTES and _duckdb_can_read(f, dialect):
        try:
            return _duckdb_profile(f.fileno(), dialect, numeric, seconds)
        except _Interrupted:
            notes.append(f"DuckDB did not finish within {seconds:.0f} s")
        except Exception as error:  # e.g. bytes that are not UTF-8 further down: pandas reads them
            notes.append(f"DuckDB could not read it ({str(error).splitlines()[0][:120]}); read with pandas")
    profile = _pandas_profile(f, dialect, numeric, deadline, size)
    profile.notes = notes + profile.notes
    return profile


# -- DuckDB ---------------------------------------------------------------------------------------


class _Interrupted(Exception):
    pass


def _duckdb_can_read(f: BinaryIO, dialect: Dialect) -> bool:
    if dialect.encoding not in ("utf-8", "utf-8-sig") or dialect.mixed:
        return False
    if not os.path.exists(f"/proc/self/fd/{f.fileno()}"):
        return False
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return False
    return True


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _duckdb_profile(fd: int, dialect: Dialect, numeric: list[bool], seconds: float) -> WholeProfile:
    import duckdb

    names = [f"c{i}" for i in range(dialect.width)]
    columns = "{" + ", ".join(f"{_quote(n)}: 'VARCHAR'" for n in names) + "}"
    na = ", ".join(_quote(v) for v in NA_VALUES)
    selects = ["count(*)"]
    for name, is_numeric in zip(names, numeric, strict=True):
        cell = f"trim({name})"
        present = f"({name} IS NOT NULL AND lower({cell}) NOT IN ({na}))"
        if is_numeric:
            text = f"replace({cell}, ',', '.')" if dialect.decimal == "," else cell
            value = f"TRY_CAST({text} AS DOUBLE)"
            selects += [
                f"count({value})",
                f"avg({value})",
                f"coalesce(var_samp({value}) * (count({value}) - 1), 0)",
                f"min({value})",
                f"max({value})",
                f"count(*) FILTER (WHERE NOT {present})",
                f"count(*) FILTER (WHERE {present} AND {value} IS NULL)",
            ]
        else:
            selects += [f"count(*) FILTER (WHERE {present})", f"approx_count_distinct({name})"]
    source = (
        f"read_csv('/proc/self/fd/{fd}', delim={_quote(dialect.delimiter)}, quote={_quote(dialect.quotechar)}, "
        f"escape={_quote(dialect.quotechar)}, header=false, skip={dialect.skip_lines}, columns={columns}, "
        "auto_detect=false, null_padding=true, strict_mode=false, parallel=false, "
        f"max_line_size={MAX_LINE_BYTES})"
    )
    con = duckdb.connect(config={"memory_limit": MEMORY_LIMIT, "threads": THREADS})
    timer = threading.Timer(seconds, con.interrupt)
    timer.start()
    try:
        row = con.execute(f"SELECT {', '.join(selects)} FROM {source}").fetchone()
    except duckdb.InterruptException as error:
        raise _Interrupted from error
    finally:
        timer.cancel()
        con.close()
    assert row is not None
    out: dict[str, ColumnStats] = {}
    values = iter(row[1:])
    rows = int(row[0])
    for column, is_numeric in zip(dialect.columns, numeric, strict=True):
        if is_numeric:
            count, mean, m2, lo, hi, missing, non_numeric = (next(values) for _ in range(7))
            stats = ColumnStats(True, missing=int(missing), non_numeric=int(non_numeric))
            if count:
                stats.merge(int(count), float(mean), float(m2), float(lo), float(hi))
        else:
            count, distinct = next(values), next(values)
            stats = ColumnStats(False, count=int(count), missing=rows - int(count), distinct=int(distinct))
        out[column] = stats
    return WholeProfile(rows=rows, columns=out, complete=True, engine="duckdb")


# -- pandas, in chunks ----------------------------------------------------------------------------


def _pandas_profile(f: BinaryIO, dialect: Dialect, numeric: list[bool], deadline: float, size: int) -> WholeProfile:
    import pandas as pd

    stream, raw = text_stream(f, dialect)
    stats = {c: ColumnStats(n) for c, n in zip(dialect.columns, numeric, strict=True)}
    distinct: dict[str, set[str]] = {c: set() for c, n in zip(dialect.columns, numeric, strict=True) if not n}
    rows, complete, notes = 0, True, []
    reader = pd.read_csv(
        stream,
        sep=dialect.delimiter,
        quotechar=dialect.quotechar,
        header=None,
        names=dialect.columns,
        dtype=str,
        keep_default_na=False,
        index_col=False,
        skipinitialspace=dialect.delimiter == " ",
        on_bad_lines="skip",
        chunksize=CHUNK_ROWS,
        engine="c",
    )
    with reader:
        for chunk in reader:
            rows += len(chunk)
            for column, s in stats.items():
                _merge_chunk(s, chunk[column], dialect.decimal, distinct.get(column))
            if time.monotonic() > deadline:
                complete = raw.position >= size
                if not complete:
                    notes.append("stopped at the time limit")
                break
    for column, seen in distinct.items():
        stats[column].distinct = len(seen)
    return WholeProfile(rows=rows, columns=stats, complete=complete, engine="pandas",
                        bytes_read=None if complete else raw.position, notes=notes)  # fmt: skip


_DISTINCT_CAP = 100_000


def _merge_chunk(stats: ColumnStats, cells: Any, decimal: str, distinct: set[str] | None) -> None:
    import pandas as pd

    text = cells.fillna("").astype(str).str.strip()
    present = ~text.str.lower().isin(NA_VALUES)
    if not stats.numeric:
        stats.count += int(present.sum())
        stats.missing += int((~present).sum())
        if distinct is not None and len(distinct) < _DISTINCT_CAP:
            distinct.update(text[present].unique().tolist())
        return
    if decimal == ",":
        text = text.str.replace(",", ".", regex=False)
    values = pd.to_numeric(text.where(present), errors="coerce")
    numbers = values.dropna()
    stats.missing += int((~present).sum())
    stats.non_numeric += int(present.sum()) - len(numbers)
    if len(numbers):
        mean = float(numbers.mean())
        m2 = float(((numbers - mean) ** 2).sum())
        stats.merge(len(numbers), mean, m2, float(numbers.min()), float(numbers.max()))
