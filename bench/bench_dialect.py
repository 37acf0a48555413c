"""Which table-dialect detector is right more often on the test corpus of awkward public tables?

Compares, per file of `tests/tablecorpus.py` (palmerpenguins, vega_datasets and scikit-learn data
re-saved in awkward dialects): loopwarden's detector (CleverCSV for the delimiter, its own rules
for preamble, header, units and decimal comma), the same without CleverCSV, CleverCSV alone
(`Detector.detect` + `Sniffer.has_header`), DuckDB's `sniff_csv` and the standard library's
`csv.Sniffer`. A file counts as right when the delimiter, the header decision and the column
count all match the truth. Needs the `report` and `corpus` extras.

    python bench/bench_dialect.py
"""

from __future__ import annotations

import csv
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tablecorpus
from loopwarden.report.readers.dialect import detect

HEAD = 64 * 1024
Guess = tuple[str, bool, int]  # delimiter, has header, column count


def ours(path: Path) -> Guess:
    data = path.read_bytes()
    d = detect(data[:HEAD], complete=len(data) <= HEAD)
    return d.delimiter, d.header, d.width


def ours_builtin(path: Path) -> Guess:
    with mock.patch.dict(sys.modules, {"clevercsv": None}):
        return ours(path)


def _sample(path: Path) -> str:
    return path.read_bytes()[:HEAD].decode("utf-8", errors="replace").lstrip("\ufeff")


def clevercsv_alone(path: Path) -> Guess:
    import clevercsv

    sample = _sample(path)
    dialect = clevercsv.Detector().detect(sample)
    header = clevercsv.Sniffer().has_header(sample)
    first = next(csv.reader(sample.splitlines(), delimiter=dialect.delimiter))
    return dialect.delimiter, header, len(first)


def duckdb_sniffer(path: Path) -> Guess:
    import duckdb

    row = (
        duckdb.connect().execute("SELECT Delimiter, HasHeader, len(Columns) FROM sniff_csv(?)", [str(path)]).fetchone()
    )
    assert row is not None
    return str(row[0]), bool(row[1]), int(row[2])


def stdlib_sniffer(path: Path) -> Guess:
    sample = _sample(path)
    sniffer = csv.Sniffer()
    dialect = sniffer.sniff(sample, delimiters=",;\t| ")
    first = next(csv.reader(sample.splitlines(), dialect))
    return dialect.delimiter, sniffer.has_header(sample), len(first)


DETECTORS: dict[str, Callable[[Path], Guess]] = {
    "loopwarden (CleverCSV + rules)": ours,
    "loopwarden without CleverCSV": ours_builtin,
    "CleverCSV alone": clevercsv_alone,
    "DuckDB sniff_csv": duckdb_sniffer,
    "csv.Sniffer": stdlib_sniffer,
}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        corpus = tablecorpus.write_corpus(Path(tmp))
        print(f"{len(corpus)} files; right = delimiter, header and column count all match\n")
        print("| detector | right | delimiter | header | columns | ms per file | wrong on |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for name, guess in DETECTORS.items():
            right = delim = head = cols = 0
            wrong: list[str] = []
            started = time.perf_counter()
            for case, path in corpus:
                try:
                    d, h, n = guess(path)
                except Exception:
                    d, h, n = "?", not case.header, -1
                ok = (d == case.delimiter, h == case.header, n == len(case.columns))
                delim, head, cols = delim + ok[0], head + ok[1], cols + ok[2]
                right += all(ok)
                if not all(ok):
                    wrong.append(case.name)
            ms = (time.perf_counter() - started) * 1000 / len(corpus)
            print(f"| {name} | {right}/{len(corpus)} | {delim} | {head} | {cols} | {ms:.0f} | {', '.join(wrong)} |")


if __name__ == "__main__":
    main()
