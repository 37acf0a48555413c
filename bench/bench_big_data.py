"""The main job on big data, offline: time, host peak RSS, report size, coverage against the truth.

    python bench/bench_big_data.py                 # both: the 300 MB CSV and the 20,000-file folder
    python bench/bench_big_data.py --only csv --rows 6500000
    python bench/bench_big_data.py --only folder --files 20000

Each case is generated in a temporary folder (`bench/bigdata.py`; nothing is committed), then
`loopwarden report DIR --out OUT --no-pdf` runs as a child process; the time is its wall time,
the peak RSS the child's (`ru_maxrss` of the finished child, the host process of the run). For the
CSV, the printed true min/max/mean of `load_pct` come from the generator and are compared with
what exploration.json says; for the folder, the files read, grouped and skipped are counted from
the coverage ledger.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bigdata


def run_report(data: Path, out: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MiB, exit code) of one offline report run in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "report", str(data), "--out", str(out), "--no-pdf", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode not in (0, 3):
        print(done.stderr.decode(errors="replace")[-2000:])
    return seconds, max(peak, before) / 1024, done.returncode


def report_size(out: Path) -> str:
    md = out / "report.md"
    tex = out / "report.tex"
    lines = len(md.read_text(encoding="utf-8").splitlines()) if md.is_file() else 0
    return f"report.md {lines} lines, report.tex {tex.stat().st_size if tex.is_file() else 0} bytes"


def big_csv(rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "out"
        data.mkdir()
        truth = bigdata.big_csv(data / "sensor_log.csv", rows)
        size = (data / "sensor_log.csv").stat().st_size
        seconds, rss, code = run_report(data, out)
        record = json.loads((out / "exploration.json").read_text(encoding="utf-8"))
        table = record["tables"][0]
        stats = table["numeric_summary"]["load_pct"]
        entry = record["coverage"]["files"][0]
        print(f"300 MB CSV: {size / 1e6:.0f} MB, {rows} rows; exit {code}; {seconds:.1f} s; peak RSS {rss:.0f} MiB")
        print(f"  profiled: {table['part']} with {table['engine']}; coverage: {entry['status']} ({entry['reason']})")
        print(f"  load_pct truth  min {truth['min']:.6g} max {truth['max']:.6g} mean {truth['mean']:.6g} n {rows}")
        print(
            f"  load_pct report min {stats['min']:.6g} max {stats['max']:.6g} mean {stats['mean']:.6g}"
            f" n {stats['count']:.0f}"
        )
        print(f"  {report_size(out)}")


def many_files(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "out"
        counts = bigdata.many_files(data, n)
        listed = sum(len(files) for _, _, files in os.walk(data))
        seconds, rss, code = run_report(data, out)
        record = json.loads((out / "exploration.json").read_text(encoding="utf-8"))
        ledger = record["coverage"]["files"]
        by_status: dict[str, int] = {}
        for entry in ledger:
            by_status[entry["status"]] = by_status.get(entry["status"], 0) + 1
        grouped = sum(1 for e in ledger if e["reason"].startswith("not read: one of"))
        print(f"{listed} files ({counts}); exit {code}; {seconds:.1f} s; peak RSS {rss:.0f} MiB")
        print(f"  ledger {len(ledger)} entries: {by_status}; {grouped} not read as members of a group")
        print(f"  groups: {[(g['pattern'], g['count']) for g in record['groups']]}")
        skipped = [(e["path"], e["reason"]) for e in ledger if e["status"] == "skipped"]
        print(f"  skipped: {skipped}")
        print(f"  {report_size(out)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["csv", "folder"])
    parser.add_argument("--rows", type=int, default=6_500_000)
    parser.add_argument("--files", type=int, default=20_000)
    args = parser.parse_args()
    if args.only in (None, "csv"):
        big_csv(args.rows)
    if args.only in (None, "folder"):
        many_files(args.files)


if __name__ == "__main__":
    main()
