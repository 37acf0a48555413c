"""Where a run of the overhead scenario spends its time: before the first model call (the bench
declaring its tools, building the agent, starting the run), from each model call to the next (a
step), and after the last (the answer, the ending, what the run leaves to free). Every framework's
stand-in model calls `Meter.decide` once a model call, so the marks are the same for all. Each
framework is timed right after a run of its own and right after a run of each framework named
with `--after`: what a run pays for the processor caches another workload left it.

    python bench/overhead_phases.py [framework ...] [--after smolagents] [--repeats 100] [--steps 30] [--cpu]

Medians over interleaved runs (wall time: read it on a quiet machine, with `cat /proc/loadavg`).
With `--cpu`, the process's CPU time instead (every thread's: smolagents runs in a worker thread):
a loaded machine's waits for a core left out, though not what its other work does to the caches.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
import warnings
from dataclasses import dataclass

import overhead
from frameworks import RUNNERS
from scenarios import Meter

_marks: list[float] = []
_decide = Meter.decide
_clock = time.perf_counter


def _marked(self: Meter, **kwargs: object) -> object:
    _marks.append(_clock())  # a list append: safe from smolagents' worker thread too
    return _decide(self, **kwargs)  # type: ignore[arg-type]


@dataclass
class Phases:
    start: float
    steps: list[float]
    end: float


async def timed(name: str, steps: int) -> Phases:
    _marks.clear()
    began = _clock()
    await RUNNERS[name](overhead.scenario(steps), steps + 2)
    ended = _clock()
    marks = list(_marks)
    return Phases(marks[0] - began, [b - a for a, b in itertools.pairwise(marks)], ended - marks[-1])


async def measure(names: list[str], after: list[str], repeats: int, steps: int) -> dict[tuple[str, str], list[Phases]]:
    """Each (framework, run before it) pair once a round, the pairs' order rotated each round."""
    pairs = [(name, before) for name in names for before in dict.fromkeys([name, *after])]
    for name in dict.fromkeys([*names, *after]):
        await RUNNERS[name](overhead.scenario(steps), steps + 2)  # imports and first calls
    found: dict[tuple[str, str], list[Phases]] = {pair: [] for pair in pairs}
    for round_ in range(repeats):
        for name, before in pairs[round_ % len(pairs) :] + pairs[: round_ % len(pairs)]:
            await RUNNERS[before](overhead.scenario(steps), steps + 2)
            found[(name, before)].append(await timed(name, steps))
    return found


def table(found: dict[tuple[str, str], list[Phases]]) -> str:
    def us(values: list[float]) -> str:
        return f"{statistics.median(values) * 1e6:.0f}"

    lines = [
        "| framework | run before it | before the first call | step 1 | step 2 | steps 3-10 | later steps"
        " | after the last call | a run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (name, before), runs in found.items():
        later = [statistics.median(r.steps[10:]) for r in runs if len(r.steps) > 10]
        lines.append(
            f"| {name} | {'its own' if before == name else before} | {us([r.start for r in runs])} µs"
            f" | {us([r.steps[0] for r in runs])} | {us([r.steps[1] for r in runs])}"
            f" | {us([statistics.median(r.steps[2:10]) for r in runs])} | {us(later) if later else ''}"
            f" | {us([r.end for r in runs])} µs | {us([r.start + sum(r.steps) + r.end for r in runs])} µs |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("frameworks", nargs="*", default=["loopwarden"])
    parser.add_argument("--after", action="append", default=[], choices=list(RUNNERS))
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--steps", type=int, default=overhead.STEPS)
    parser.add_argument("--cpu", action="store_true", help="the process's CPU time, not wall time")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.cpu:
        global _clock
        _clock = time.process_time
    Meter.decide = _marked  # type: ignore[method-assign,assignment]
    print(table(asyncio.run(measure(args.frameworks, args.after, args.repeats, args.steps))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
