"""The main job on big data, offline: time, host peak RSS, report size, coverage against the truth.

    python bench/bench_big_data.py                 # both: the 300 MB CSV and the 20,000-file folder
    python bench/bench_big_data.py --only csv --rows 6500000
    python bench/bench_big_data.py --only folder --files 20000
    python bench/bench_big_data.py --pdf           # also compile report.pdf (xelatex) and count its pages

Each case is generated in a temporary folder (`bench/bigdata.py`; nothing is committed), then
`loopwarden report DIR --out OUT --no-pdf` runs as a child process; the time is its wall time.
Memory is measured separately for the host (`RUSAGE_SELF` inside that process: the run itself,
DuckDB's profiling included) and for its children (the largest VmHWM of the sandboxed figure
processes and xelatex, polled from /proc). For the
CSV, the printed true min/max/mean of `load_pct` come from the generator and are compared with
what exploration.json says; for the folder, the files read, grouped and skipped are counted from
the coverage ledger.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bigdata

HOST = """
import json, os, resource, sys
from loopwarden.cli import main
try:
    main()
finally:
    with open(os.environ["BENCH_RSS_FILE"], "w") as f:
        json.dump({"self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, f)
"""
"""The report run's own process: `loopwarden report` in-process, then its peak RSS (RUSAGE_SELF)."""


class ChildWatch(threading.Thread):
    """The largest peak RSS (VmHWM) of any process below `root`: the sandboxed figure children,
    polled from /proc. RUSAGE_CHILDREN would not do: Linux carries the parent's RSS at fork into
    a child's ru_maxrss across exec, so every figure child would count the host's memory too."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.peaks: dict[int, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            for pid in self._descendants():
                hwm = _vm_hwm_kib(pid)
                if hwm is not None:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), hwm)

    def _descendants(self) -> list[int]:
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as f:
                        parents[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        below, frontier = [], [self.root]
        while frontier:
            parent = frontier.pop()
            children = [pid for pid, ppid in parents.items() if ppid == parent]
            below += children
            frontier += children
        return below


def _vm_hwm_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


PDF = False
"""--pdf: compile the PDF too (xelatex), and count its pages."""


def run_report(data: Path, out: Path) -> tuple[float, float, float, int]:
    """(seconds, host peak RSS MiB, largest child's peak RSS MiB, exit code) of one offline run."""
    rss_file = out.parent / "rss.json"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", HOST, "report", str(data), "--out", str(out), "--json", *([] if PDF else ["--no-pdf"])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "BENCH_RSS_FILE": str(rss_file)},
    )
    watch = ChildWatch(process.pid)
    watch.start()
    _, stderr = process.communicate()
    seconds = time.perf_counter() - started
    watch.stop.set()
    watch.join()
    if process.returncode not in (0, 3):
        print(stderr.decode(errors="replace")[-2000:])
    host = json.loads(rss_file.read_text())["self"]
    return seconds, host / 1024, max(watch.peaks.values(), default=0) / 1024, process.returncode


def report_size(out: Path) -> str:
    md = out / "report.md"
    tex = out / "report.tex"
    lines = len(md.read_text(encoding="utf-8").splitlines()) if md.is_file() else 0
    size = f"report.md {lines} lines, report.tex {tex.stat().st_size if tex.is_file() else 0} bytes"
    pdf = out / "report.pdf"
    if pdf.is_file():
        from pypdf import PdfReader  # the `documents` extra, in `all`

        size += f", report.pdf {len(PdfReader(pdf).pages)} pages"
    return size


def big_csv(rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "data", Path(tmp) / "out"
        data.mkdir()
        truth = bigdata.big_csv(data / "sensor_log.csv", rows)
        size = (data / "sensor_log.csv").stat().st_size
        seconds, rss, child, code = run_report(data, out)
        record = json.loads((out / "exploration.json").read_text(encoding="utf-8"))
        table = record["tables"][0]
        stats = table["numeric_summary"]["load_pct"]
        entry = record["coverage"]["files"][0]
        print(f"CSV: {size / 1e6:.0f} MB, {rows} rows; exit {code}; {seconds:.1f} s")
        print(f"  peak RSS: host {rss:.0f} MiB, largest child (figure or xelatex) {child:.0f} MiB")
        figures = [(f["path"], f["caption"]) for f in record["figures"]]
        print(f"  figures: {figures}")
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
        seconds, rss, child, code = run_report(data, out)
        record = json.loads((out / "exploration.json").read_text(encoding="utf-8"))
        ledger = record["coverage"]["files"]
        by_status: dict[str, int] = {}
        for entry in ledger:
            by_status[entry["status"]] = by_status.get(entry["status"], 0) + 1
        grouped = sum(1 for e in ledger if e["reason"].startswith("not read: one of"))
        print(f"{listed} files ({counts}); exit {code}; {seconds:.1f} s")
        print(f"  peak RSS: host {rss:.0f} MiB, largest child (figure or xelatex) {child:.0f} MiB")
        print(f"  truth: {sum(counts.values())} files made, {listed} on disk; ledger {len(ledger)} entries")
        print(f"  ledger by status: {by_status}; {grouped} not read as members of a group")
        print(f"  groups: {[(g['pattern'], g['count']) for g in record['groups']]}")
        skipped = [(e["path"], e["reason"]) for e in ledger if e["status"] == "skipped"]
        print(f"  skipped: {skipped}")
        print(f"  {report_size(out)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["csv", "folder"])
    parser.add_argument("--rows", type=int, default=6_500_000)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--pdf", action="store_true", help="compile the PDF too and count its pages")
    args = parser.parse_args()
    global PDF
    PDF = args.pdf
    if args.only in (None, "csv"):
        big_csv(args.rows)
    if args.only in (None, "folder"):
        many_files(args.files)


if __name__ == "__main__":
    main()
