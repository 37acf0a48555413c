"""Run both benchmarks and print their tables; with --readme, write them into README.md between
the `<!-- bench:... -->` markers (so the README shows exactly what this command produced).

    pip install -e '.[bench]'
    python bench/run.py --readme
"""

from __future__ import annotations

import asyncio
import platform
import sys
import warnings
from importlib.metadata import PackageNotFoundError, version

import bench_detectors
import collapse_waste
import overhead
from frameworks import RUNNERS
from readme_blocks import write_blocks

PACKAGES = ("loopwarden", "langgraph", "openai-agents", "pydantic-ai-slim", "smolagents")


def versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return f"Python {platform.python_version()}; " + ", ".join(found)


def main() -> int:
    warnings.simplefilter("ignore")
    frameworks = list(RUNNERS)
    waste = collapse_waste.table(asyncio.run(collapse_waste.measure(frameworks)))
    waste_block = f"{waste}\n\n{collapse_waste.notes()}\n\n_{versions()}._\n"
    speed = overhead.table(asyncio.run(overhead.measure(frameworks)))
    growth = overhead.growth_table(asyncio.run(overhead.measure_growth()))
    detectors = bench_detectors.table(bench_detectors.measure(150, 7), 150)
    speed_block = (
        f"{speed}\n\n{growth}\n\n{detectors}\n\n_Median of {overhead.REPEATS} interleaved runs after a warm-up run"
        " (detectors: 7), default detectors on and tracing off unless a row says otherwise,"
        " on a shared 2-core machine (ratios move by tens of percent from run to run);"
        f" {versions()}._\n"
    )
    print(waste_block)
    print(speed_block)
    if "--readme" in sys.argv:
        write_blocks({"collapse": waste_block, "overhead": speed_block})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
