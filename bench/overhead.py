"""Loop overhead per step: a zero-latency scripted model making N distinct tool calls (then
answering), in loopwarden and in each peer, with limits raised so every framework runs the same
N steps. Reported: median wall time per step over REPEATS interleaved runs, the ratio to
loopwarden measured in the same process, and loopwarden alone at 30, 120 and 500 steps (the
per-step cost must stay flat as the history grows). The model does not meter tokens here, so
its own cost does not grow with the history either.

    python bench/overhead.py [framework ...]
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
LONGER = (120, 500)
REPEATS = 15


def scenario(steps: int) -> Scenario:
    def distinct_reads(i: int, since_steer: int | None) -> Decision:
        return Call("read_file", {"path": f"part-{i}.txt"}) if i <= steps else Answer("done")

    return Scenario(
        "overhead",
        f"{steps} distinct tool calls, zero-latency model",
        "Read every part.",
        ("read_file",),
        distinct_reads,
        onset=1,
        checklist=(),
        metered=False,
        min_cap=steps + 10,
    )


async def one_run(name: str, steps: int = STEPS) -> tuple[float, int]:
    began = time.perf_counter()
    outcome = await RUNNERS[name](scenario(steps), steps + 2)
    ran = len(outcome.world.executed)
    return (time.perf_counter() - began) / max(ran, 1), ran


async def interleaved(jobs: list[tuple[str, int]], repeats: int) -> dict[tuple[str, int], tuple[float, int] | str]:
    """Warm each job up once, then run them in a rotating order each round, so drift on a
    shared machine falls on every job alike; the median of each."""
    failed: dict[tuple[str, int], str] = {}
    for job in jobs:
        try:
            await one_run(*job)
        except Exception as error:
            failed[job] = f"{type(error).__name__}: {error}"[:120]
    running = [j for j in jobs if j not in failed]
    timings: dict[tuple[str, int], list[float]] = {j: [] for j in running}
    steps: dict[tuple[str, int], int] = {}
    for round_ in range(repeats):
        for job in running[round_ % len(running) :] + running[: round_ % len(running)]:
            seconds, steps[job] = await one_run(*job)
            timings[job].append(seconds)
    return {j: failed[j] if j in failed else (statistics.median(timings[j]), steps[j]) for j in jobs}


async def measure(frameworks: list[str]) -> dict[str, tuple[float, int] | str]:
    """Every framework at STEPS steps."""
    results = await interleaved([(name, STEPS) for name in frameworks], REPEATS)
    return {name: results[(name, STEPS)] for name in frameworks}


async def measure_growth() -> dict[int, tuple[float, int] | str]:
    """loopwarden alone at STEPS and the longer runs."""
    sizes = (STEPS, *LONGER)
    results = await interleaved([("loopwarden", n) for n in sizes], REPEATS)
    return {n: results[("loopwarden", n)] for n in sizes}


def table(results: dict[str, tuple[float, int] | str]) -> str:
    base = results.get("loopwarden")
    lines = ["| framework | tool steps run | median time per step | vs loopwarden |", "|---|---:|---:|---:|"]
    for name, value in results.items():
        if isinstance(value, str):
            lines.append(f"| {name} | | could not run: {value} | |")
            continue
        seconds, steps = value
        ratio = seconds / base[0] if isinstance(base, tuple) else float("nan")
        lines.append(f"| {name} | {steps} | {seconds * 1e3:.3f} ms | {ratio:.2f}x |")
    peers = [v[0] for n, v in results.items() if n != "loopwarden" and isinstance(v, tuple)]
    if peers and isinstance(base, tuple):
        lines.append(f"\nThe lightest peer takes {min(peers) / base[0]:.1f}x loopwarden's time per step.")
    return "\n".join(lines)


def growth_table(results: dict[int, tuple[float, int] | str]) -> str:
    first = results.get(STEPS)
    lines = ["| loopwarden, tool steps | median time per step | vs 30 steps |", "|---:|---:|---:|"]
    for n, value in results.items():
        if isinstance(value, str):
            lines.append(f"| {n} | could not run: {value} | |")
            continue
        ratio = value[0] / first[0] if isinstance(first, tuple) else float("nan")
        lines.append(f"| {value[1]} | {value[0] * 1e6:.0f} µs | {ratio:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    warnings.simplefilter("ignore")
    frameworks = [n for n in RUNNERS if len(sys.argv) < 2 or n in sys.argv[1:]]
    print(table(asyncio.run(measure(frameworks))))
    print()
    print(growth_table(asyncio.run(measure_growth())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
