"""What the figure sandbox costs to start, as a ratio to a bare `python -I -c pass` child measured
in the same run (so load from other processes falls on both).

    python bench/bench_sandbox_startup.py [--repeat 7]

Rows, each the median of N runs, interleaved:
- `python -I -c pass`: the baseline child (1.00x).
- `python -I -c "import matplotlib.pyplot, pandas"`: what any figure child must import.
- sandbox, rlimits only: `FigureSandbox.run` of a one-line plot with no OS isolation.
- sandbox, isolated: the same with the isolation layer this machine has (Landlock + seccomp, or
  bubblewrap), i.e. what `make_figure` costs before the model's code does any work.
The difference between the last two rows is the price of the OS isolation itself.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from loopwarden.report.sandbox.isolation import Isolation, probe_isolation
from loopwarden.report.sandbox.runner import FigureSandbox

CODE = "plt.plot([1, 2, 3], [1, 4, 9])"


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bare(args: list[str]) -> Callable[[], object]:
    return lambda: subprocess.run([sys.executable, "-I", *args], check=True)


def figure(box: FigureSandbox) -> Callable[[], object]:
    def run() -> None:
        outcome = asyncio.run(box.run(CODE, "bench"))
        if not outcome.ok:
            raise SystemExit(f"the figure failed: {outcome.message}")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    isolation = probe_isolation()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp, "data"), Path(tmp, "out")
        data.mkdir()
        out.mkdir()
        rows: dict[str, Callable[[], object]] = {
            "python -I -c pass": bare(["-c", "pass"]),
            "python -I -c 'import matplotlib.pyplot, pandas'": bare(["-c", "import matplotlib.pyplot, pandas"]),
            "sandbox, rlimits only": figure(
                FigureSandbox(data, out, Isolation(None, False, None), allow_rlimits_only=True)
            ),
        }
        if isolation.isolated:
            rows[f"sandbox, isolated ({isolation.layer})"] = figure(FigureSandbox(data, out, isolation))
        for fn in rows.values():  # warm the page cache and matplotlib's font cache
            fn()
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.repeat):
            for name, fn in rows.items():
                times[name].append(timed(fn))
    base = statistics.median(times["python -I -c pass"])
    print(isolation.describe())
    print("| child | median wall | vs python -I -c pass |\n|---|---:|---:|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median * 1000:.0f} ms | {median / base:.1f}x |")
    print(f"_median of {args.repeat} interleaved runs; Python {sys.version.split()[0]}_")


if __name__ == "__main__":
    main()
