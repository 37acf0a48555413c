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
REPEATS = 15


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


async def one_run(name: str) -> tuple[float, int]:
    began = time.perf_counter()
    outcome = await RUNNERS[name](OVERHEAD, STEPS + 2)
    steps = len(outcome.world.executed)
    return (time.perf_counter() - began) / max(steps, 1), steps


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
    """Warm every framework up once, then interleave the timed runs (a rotating order each
    round) so drift on a shared machine falls on every framework alike."""
    failed: dict[str, str] = {}
    timings: dict[str, list[float]] = {name: [] for name in frameworks}
    steps: dict[str, int] = {}
    for name in frameworks:
        try:
            await one_run(name)
        except Exception as error:
            failed[name] = f"{type(error).__name__}: {error}"[:120]
    running = [n for n in frameworks if n not in failed]
    for round_ in range(REPEATS):
        for name in running[round_ % len(running) :] + running[: round_ % len(running)]:
            seconds, steps[name] = await one_run(name)
            timings[name].append(seconds)
    return {n: failed[n] if n in failed else (statistics.median(timings[n]), steps[n]) for n in frameworks}


def main() -> int:
    warnings.simplefilter("ignore")
    frameworks = [n for n in RUNNERS if len(sys.argv) < 2 or n in sys.argv[1:]]
    print(table(asyncio.run(measure(frameworks))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
