"""Working out how a delimited text table is written, as a person reading its first lines would.

`detect(head)` looks at the first block of a file and says: its encoding (a BOM, UTF-8, Windows-1252,
or UTF-8 with stray Windows-1252 bytes), the lines above the table to skip (comment lines, a
metadata row such as scikit-learn's "178,13,class_0,..."), the delimiter, whether the first row is
a header, a units row under it, a decimal comma, and the column names. A header whose width differs
from the rows' is never trusted: the table is read with generated names and the `notes` say why,
so no column is ever dropped without a word.

The delimiter and quote character come from CleverCSV's data-consistency detector, run on the
table's lines once the preamble is set aside (`python bench/bench_dialect.py` compares it with
DuckDB's sniffer and the standard library's on the test corpus). Without CleverCSV installed the
same consistency measure is computed here over the usual delimiters.
"""

from __future__ import annotations

import codecs
import csv
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FALLBACK_ERRORS", "Dialect", "detect", "generated_names", "split_rows", "unique_names"]

DELIMITERS = (",", ";", "\t", "|", " ")
COMMENT_MARKS = ("#", "%", "//")
MAX_PREAMBLE = 20
"""Lines above the table that may be skipped as comments or metadata."""
SAMPLE_ROWS = 200
CLEVER_ROWS = 100
"""Lines CleverCSV scores (its cost grows with the sample; 100 lines decide the delimiter)."""
FALLBACK_ERRORS = "loopwarden-cp1252"
"""Decoding error handler: bytes that are not UTF-8 are read as Windows-1252 (mixed files)."""

_NUMBER = re.compile(r"^[+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][+-]?\d+)?%?$")
_NA = frozenset({"", "na", "n/a", "nan", "null", "none", "-", "?", "#n/a", "<na>", "missing"})
_UNIT = re.compile(r"^(?:\[[^\]]{1,12}\]|\([^)]{1,12}\)|[A-Za-zµμΩ°%‰][A-Za-z0-9µμΩ°%‰/^·*.\-²³]{0,11})$")


def _cp1252_fallback(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    bad = error.object[error.start : error.end]
    return bad.decode("cp1252", errors="replace"), error.end


codecs.register_error(FALLBACK_ERRORS, _cp1252_fallback)


@dataclass
class Dialect:
    encoding: str
    """The codec to read the file with ("utf-8-sig", "utf-8", "cp1252", "utf-16")."""
    errors: str = FALLBACK_ERRORS
    """The decoding error handler (stray bytes in a UTF-8 file are read as Windows-1252)."""
    mixed: bool = False
    """Bytes that are not UTF-8 were seen in a UTF-8 file."""
    delimiter: str = ","
    quotechar: str = '"'
    decimal: str = "."
    preamble: list[str] = field(default_factory=list)
    """The lines skipped above the table, as text."""
    header: bool = True
    units: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    skip_lines: int = 0
    """Physical lines before the first data row (preamble, header, units)."""
    data_offset: int = 0
    """Byte offset of the first data row."""
    notes: list[str] = field(default_factory=list)
    detector: str = "builtin"
    names_from: str | None = None
    """The description file the column names were taken from (a headerless table), if any."""

    @property
    def width(self) -> int:
        return len(self.columns)

    def describe(self) -> str:
        """One line for the profile: what was detected."""
        parts = [f"delimiter {_show(self.delimiter)}", f"encoding {self.encoding_label}"]
        names = f"names from {self.names_from}" if self.names_from else "names generated"
        parts.append("header row" if self.header else f"no header row ({names})")
        if self.preamble:
            parts.append(f"{len(self.preamble)} line(s) skipped above the table")
        if self.units and self.header:  # a headerless table's units come from its description
            parts.append("units row")
        if self.decimal != ".":
            parts.append(f"decimal {self.decimal!r}")
        return ", ".join(parts)

    @property
    def encoding_label(self) -> str:
        if self.mixed:
            return "UTF-8 with some Windows-1252 bytes"
        return {"utf-8-sig": "UTF-8 with BOM", "utf-8": "UTF-8", "cp1252": "Windows-1252"}.get(
            self.encoding, self.encoding
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "delimiter": self.delimiter,
            "quotechar": self.quotechar,
            "decimal": self.decimal,
            "encoding": self.encoding_label,
            "header": self.header,
            "skipped_lines": self.preamble,
            "units": self.units,
            "detector": self.detector,
            "names_from": self.names_from,
            "codec": self.encoding,
            "skip_lines": self.skip_lines,
        }


def generated_names(n: int) -> list[str]:
    return [f"column_{i}" for i in range(1, n + 1)]


def detect(head: bytes, *, complete: bool) -> Dialect:
    """The dialect of a table from its first bytes; `complete` when `head` is the whole file."""
    encoding, errors, bom, mixed = _encoding(head)
    raw_lines = head[len(bom) :].splitlines(keepends=True)
    if not complete and len(raw_lines) > 1:
        raw_lines = raw_lines[:-1]  # the last line may be cut
    lines = [line.decode(_codec(encoding), errors=errors) for line in raw_lines]
    dialect = Dialect(encoding=encoding, errors=errors, mixed=mixed)
    n_comments = _leading_comments(lines)
    body = lines[n_comments:]
    delimiter, quotechar, detector = _delimiter(body)
    dialect.delimiter, dialect.quotechar, dialect.detector = delimiter, quotechar, detector
    rows = split_rows(body[: SAMPLE_ROWS + MAX_PREAMBLE], delimiter, quotechar)
    widths = [len(r) for r, _ in rows]
    width = _modal_width(widths[min(len(widths) // 4, MAX_PREAMBLE) :] or widths)
    # Leading rows narrower or wider than the table are metadata, not a header.
    first = next((i for i, w in enumerate(widths[:MAX_PREAMBLE]) if w == width), 0)
    skipped_rows = rows[:first]
    skipped_lines = sum(n for _, n in skipped_rows)
    dialect.preamble = [line.rstrip("\r\n") for line in lines[: n_comments + skipped_lines]]
    if n_comments:
        dialect.notes.append(f"skipped {n_comments} comment line(s) above the table")
    for row, _ in skipped_rows:
        shown = delimiter.join(row)[:80]
        dialect.notes.append(
            f"skipped a line with {len(row)} field(s) where the rows have {width} (metadata, not a header): {shown!r}"
        )
    table = rows[first:]
    data_rows = [r for r, _ in table[1:]]
    dialect.decimal = _decimal(data_rows, delimiter)
    if table and _is_metadata(table[0][0], data_rows, dialect.decimal):
        # Neither a header nor data: numbers where the rows have numbers, and text where they
        # have numbers too (scikit-learn's "150,4,setosa,versicolor,virginica" over iris).
        row, n = table.pop(0)
        skipped_lines += n
        dialect.preamble.append(lines[n_comments + skipped_lines - 1].rstrip("\r\n"))
        dialect.notes.append(
            f"skipped a first row that mixes counts and labels (metadata, not a header): {delimiter.join(row)[:80]!r}"
        )
        data_rows = data_rows[1:]
    header_row = table[0][0] if table else []
    dialect.header = bool(table) and _is_header(header_row, data_rows, dialect.decimal)
    used = 1 if dialect.header else 0
    if dialect.header:
        dialect.columns = _names(header_row)
        if len(table) > 1:
            units = _units(header_row, table[1][0], data_rows[1:], dialect.decimal)
            if units is not None:
                dialect.units = {dialect.columns[i]: u for i, u in enumerate(units) if u}
                used = 2
    else:
        dialect.columns = generated_names(width)
    consumed = n_comments + skipped_lines + sum(n for _, n in table[:used])
    dialect.skip_lines = consumed
    dialect.data_offset = len(bom) + sum(len(line) for line in raw_lines[:consumed])
    ragged = sum(1 for r, _ in table[used:] if len(r) != width)
    if ragged:
        dialect.notes.append(
            f"{ragged} of the first {len(table) - used} rows have a number of fields other than {width}"
        )
    return dialect


def _show(delimiter: str) -> str:
    return {"\t": "tab", " ": "space"}.get(delimiter, repr(delimiter))


def _codec(encoding: str) -> str:
    return "utf-8" if encoding == "utf-8-sig" else encoding


def _encoding(head: bytes) -> tuple[str, str, bytes, bool]:
    """(codec, error handler, BOM bytes, stray non-UTF-8 bytes seen)."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig", FALLBACK_ERRORS, codecs.BOM_UTF8, not _is_utf8(head[3:])
    for bom in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        if head.startswith(bom):
            return "utf-16", "replace", b"", False
    if _is_utf8(head):
        return "utf-8", FALLBACK_ERRORS, b"", False
    # Not UTF-8 throughout: UTF-8 with stray bytes if it has real multi-byte characters too.
    valid_multibyte = re.search(rb"[\xc2-\xf4][\x80-\xbf]+", head) is not None
    strays = head.decode("utf-8", errors="replace").count("\ufffd")
    if valid_multibyte and strays < len(head) // 20:
        return "utf-8", FALLBACK_ERRORS, b"", True
    return "cp1252", "replace", b"", False


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start >= len(data) - 4  # a character cut at the block's end
    return True


def _leading_comments(lines: list[str]) -> int:
    n = 0
    for line in lines[: MAX_PREAMBLE * 5]:
        stripped = line.strip()
        if stripped and not stripped.startswith(COMMENT_MARKS):
            break
        n += 1
    return n


def split_rows(lines: list[str], delimiter: str, quotechar: str) -> list[tuple[list[str], int]]:
    """Rows parsed from lines, each with the number of physical lines it took (quoted newlines)."""
    counter = _LineCounter(lines)
    reader = csv.reader(counter, delimiter=delimiter, quotechar=quotechar, skipinitialspace=delimiter == " ")
    rows: list[tuple[list[str], int]] = []
    before = 0
    try:
        for row in reader:
            rows.append(([c.strip() for c in row], counter.taken - before))
            before = counter.taken
    except csv.Error:
        pass
    return [(r, n) for r, n in rows if any(r)]


class _LineCounter:
    def __init__(self, lines: list[str]) -> None:
        self._lines = iter(lines)
        self.taken = 0

    def __iter__(self) -> _LineCounter:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.taken += 1
        return line


def _modal_width(widths: list[int]) -> int:
    if not widths:
        return 1
    counts = Counter(widths)
    return max(counts, key=lambda w: (counts[w], w))


def _delimiter(lines: list[str]) -> tuple[str, str, str]:
    sample = "".join(lines[:CLEVER_ROWS])
    try:
        import clevercsv

        found = clevercsv.Detector().detect(sample, delimiters=list(DELIMITERS))
        if found is not None and found.delimiter in DELIMITERS:
            return found.delimiter, found.quotechar or '"', "clevercsv"
    except ImportError:
        pass
    except Exception:  # the detector gave up on this sample: the builtin measure still answers
        pass
    return _consistency(lines), '"', "builtin"


def _consistency(lines: list[str]) -> str:
    """The delimiter that splits the most rows into the same number (> 1) of typed fields."""
    best, best_score = ",", -1.0
    for delimiter in DELIMITERS:
        rows = [r for r, _ in split_rows(lines[:SAMPLE_ROWS], delimiter, '"')]
        if not rows:
            continue
        width = _modal_width([len(r) for r in rows])
        if width < 2:
            continue
        pattern = sum(1 for r in rows if len(r) == width) / len(rows)
        cells = [c for r in rows for c in r]
        typed = sum(1 for c in cells if _NUMBER.match(c) or c.lower() in _NA or len(c) < 40) / max(len(cells), 1)
        score = pattern * typed * (1 - 1 / width)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def is_number(cell: str, decimal: str = ".") -> bool:
    if decimal == "," and "." in cell:
        return False
    return bool(_NUMBER.match(cell))


def _decimal(rows: list[list[str]], delimiter: str) -> str:
    if delimiter == ",":
        return "."
    cells = [c for r in rows[:SAMPLE_ROWS] for c in r if c]
    comma = sum(1 for c in cells if re.fullmatch(r"[+-]?\d*,\d+(?:[eE][+-]?\d+)?", c))
    point = sum(1 for c in cells if re.fullmatch(r"[+-]?\d*\.\d+(?:[eE][+-]?\d+)?", c))
    return "," if comma > point else "."


def _numeric_columns(rows: list[list[str]], width: int, decimal: str) -> list[bool]:
    out = []
    for i in range(width):
        values = [r[i] for r in rows[:SAMPLE_ROWS] if i < len(r) and r[i].lower() not in _NA]
        out.append(bool(values) and sum(is_number(v, decimal) for v in values) >= 0.9 * len(values))
    return out


def _is_metadata(first: list[str], rows: list[list[str]], decimal: str) -> bool:
    numeric = _numeric_columns(rows, len(first), decimal)
    cells = list(zip(first, numeric, strict=False))
    numbers = sum(1 for c, n in cells if n and is_number(c, decimal))
    words = sum(1 for c, n in cells if n and c and not is_number(c, decimal) and c.lower() not in _NA)
    return numbers > 0 and words > 0


def _is_header(first: list[str], rows: list[list[str]], decimal: str) -> bool:
    """A header names columns: not numbers, and (where the column below is numeric) not data."""
    if not first:
        return False
    numbers = sum(1 for c in first if is_number(c, decimal))
    if numbers > len(first) / 2:
        return False
    numeric = _numeric_columns(rows, len(first), decimal)
    if any(n and not is_number(c, decimal) and c.lower() not in _NA for c, n in zip(first, numeric, strict=False)):
        return True
    if numbers:
        return False
    # An all-text table: a header when its cells are distinct and none recurs in the rows below.
    below = {c for r in rows[:SAMPLE_ROWS] for c in r}
    return len(set(first)) == len(first) and not (set(first) & below)


def _units(header: list[str], row: list[str], rows: list[list[str]], decimal: str) -> list[str] | None:
    """The cells of a units row under the header, or None when `row` is data."""
    if len(row) != len(header) or not rows:
        return None
    numeric = _numeric_columns(rows, len(header), decimal)
    if not any(numeric):
        return None
    units, seen = [], 0
    for cell, is_numeric in zip(row, numeric, strict=True):
        if is_number(cell, decimal):
            return None
        if cell and not _UNIT.match(cell):
            return None
        if cell and is_numeric:
            seen += 1
        units.append(cell.strip("[]()") if cell else "")
    return units if seen else None


def _names(row: list[str]) -> list[str]:
    return unique_names([cell.strip().lstrip("\ufeff") for cell in row])


def unique_names(cells: list[str]) -> list[str]:
    """Column names as written, an empty one as column_N, a repeated one as name_2, name_3 ..."""
    names: list[str] = []
    for i, cell in enumerate(cells, 1):
        name = cell or f"column_{i}"
        candidate, n = name, 2
        while candidate in names:
            candidate, n = f"{name}_{n}", n + 1
        names.append(candidate)
    return names
