"""Loop overhead per step: a zero-latency scripted model making STEPS distinct tool calls (then
answering), in loopwarden and in each peer, with limits raised so every framework runs the same
STEPS. Reported: median wall time per step over REPEATS runs, and the ratio to loopwarden
measured in the same process.

    python bench/overhead.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import warnings

from frameworks import RUNNERS
from scenarios import Answer, Call, Decision, Scenario

STEPS = 30
REPEATS = 5


def _distinct_reads(i: int, since_steer: int | None) -> Decision:
    return Call("read_file", {"path": f"part-{i}.txt"}) if i <= STEPS else Answer("done")


OVERHEAD = Scenario(
    "overhead",
    f"{STEPS} distinct tool calls, zero-latency model",
    "Read every part.",
    ("read_file",),
    _distinct_reads,
    onset=1,
    checklist=(),
)


async def per_step_seconds(name: str) -> tuple[float, int]:
    timings, steps = [], 0
    runner = RUNNERS[name]
    await runner(OVERHEAD, STEPS + 2)  # warm-up: imports, caches
    for _ in range(REPEATS):
        began = time.perf_counter()
        outcome = await runner(OVERHEAD, STEPS + 2)
        elapsed = time.perf_counter() - began
        steps = len(outcome.world.executed)
        timings.append(elapsed / max(steps, 1))
    return statistics.median(timings), steps


def table(results: dict[str, tuple[float, int] | str]) -> str:
    base = results.get("loopwarden")
    lines = ["| framework | tool steps run | median time per step | vs loopwarden |", "|---|---:|---:|---:|"]
    for name, value in results.items():
        if isinstance(value, str):
            lines.append(f"| {name} | | could not run: {value} | |")
            continue
        seconds, steps = value
        ratio = seconds / base[0] if isinstance(base, tuple) else float("nan")
        lines.append(f"| {name} | {steps} | {seconds * 1e3:.2f} ms | {ratio:.2f}x |")
    return "\n".join(lines)


async def measure(frameworks: list[str]) -> dict[str, tuple[float, int] | str]:
    results: dict[str, tuple[float, int] | str] = {}
    for name in frameworks:
        try:
            results[name] = await per_step_seconds(name)
        except Exception as error:
            results[name] = f"{type(error).__name__}: {error}"[:120]
    return results


def main() -> int:
    warnings.simplefilter("ignore")
    frameworks = [n for n in RUNNERS if len(sys.argv) < 2 or n in sys.argv[1:]]
    print(table(asyncio.run(measure(frameworks))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
