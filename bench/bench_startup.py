"""How long loopwarden takes to start: `python -c "import loopwarden"` and `loopwarden --help`,
each against `python -c pass` (the interpreter alone) measured in the same run, interleaved.

    python bench/bench_startup.py [--repeat 11]

Prints the median and the best of N for each, and what loopwarden adds to the bare interpreter.
The targets (issue 17): the import within 150 ms, the command list within 0.5 s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    cli = shutil.which("loopwarden") or str(Path(sys.executable).with_name("loopwarden"))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import loopwarden"': [sys.executable, "-c", "import loopwarden"],
        "loopwarden --help": [cli, "--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):  # interleaved: load from other processes falls on all alike
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    bare = statistics.median(times["python -c pass"])
    print(f"median of {args.repeat} (best in brackets)")
    for name, runs in times.items():
        median = statistics.median(runs)
        added = "" if name == "python -c pass" else f", {(median - bare) * 1000:.0f} ms over the bare interpreter"
        print(f"{name:30s} {median * 1000:6.0f} ms ({min(runs) * 1000:.0f}){added}")


if __name__ == "__main__":
    main()
