"""What the loop detectors cost: the same healthy scripted run (N segmented reads with a line of
narration each, then an answer) with every detector off, with each default detector alone, and
with the default set, measured in the same process, interleaved. The model and tools are
instant, so the figures are the runtime's own cost per tool round.

    python bench/bench_detectors.py [--rounds 150] [--repeat 7]

Prints a table: median per round, and the ratio to the run with every detector off (1.00 = free).
The repeated-call ladder is not a detector here: it guards every run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence

from healthy_run import read_lines, reader

from loopwarden import Agent, Budgets, LoopConfig
from loopwarden.guard import DEFAULT_DETECTORS, DetectorFactory

NARRATION = "Reading block {n}; so far the flow keeps rising."


def configurations() -> dict[str, Sequence[DetectorFactory] | None]:
    chosen: dict[str, Sequence[DetectorFactory] | None] = {"every detector off": []}
    chosen.update({f"{name} alone": [make] for name, make in DEFAULT_DETECTORS.items()})
    chosen["default detectors"] = None
    return chosen


def once(rounds: int, detectors: Sequence[DetectorFactory] | None) -> float:
    config = LoopConfig(budgets=Budgets(max_tool_rounds=rounds + 5, max_model_calls=rounds + 5))
    agent = Agent(reader(rounds, NARRATION), [read_lines], config=config, detectors=detectors, trace=False)
    start = time.perf_counter()
    result = asyncio.run(agent.run("read the log"))
    elapsed = time.perf_counter() - start
    assert result.status == "completed" and result.totals.tool_executions == rounds, result.stop_reason
    assert all(getattr(e, "action", "allowed") == "allowed" for e in result.events if e.type == "guard_verdict")
    return elapsed


def measure(rounds: int, repeat: int) -> dict[str, float]:
    """Median seconds per round of each configuration, interleaved so load hits all alike."""
    chosen = configurations()
    times: dict[str, list[float]] = {name: [] for name in chosen}
    for detectors in chosen.values():  # warm-up
        once(rounds, detectors)
    for _ in range(repeat):
        for name, detectors in chosen.items():
            times[name].append(once(rounds, detectors) / rounds)
    return {name: statistics.median(t) for name, t in times.items()}


def table(per_round: dict[str, float], rounds: int) -> str:
    bare = per_round["every detector off"]
    lines = [f"| detectors ({rounds} tool rounds) | median per round | vs every detector off |", "|---|---:|---:|"]
    lines += [f"| {name} | {s * 1e6:.0f} µs | {s / bare:.2f}x |" for name, s in per_round.items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(table(measure(args.rounds, args.repeat), args.rounds))


if __name__ == "__main__":
    main()
