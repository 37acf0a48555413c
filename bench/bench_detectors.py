"""What the loop detectors cost: the same healthy scripted run (N segmented reads with a line of
narration each, then an answer) with the default detectors and with none, measured in the same
process. The model and tools are instant, so the ratio shows the runtime's own overhead.

    python bench/bench_detectors.py [--rounds 150] [--repeat 5]

Prints the best of N wall-clock for each, the ratio (1.0 = free) and per-round microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from healthy_run import read_lines, reader

from loopwarden import Agent, Budgets, LoopConfig

NARRATION = "Reading block {n}; so far the flow keeps rising."


def once(rounds: int, detectors: list[object] | None) -> float:
    config = LoopConfig(budgets=Budgets(max_tool_rounds=rounds + 5, max_model_calls=rounds + 5))
    agent = Agent(reader(rounds, NARRATION), [read_lines], config=config, detectors=detectors)  # type: ignore[arg-type]
    start = time.perf_counter()
    result = asyncio.run(agent.run("read the log"))
    elapsed = time.perf_counter() - start
    assert result.status == "completed" and result.totals.tool_executions == rounds, result.stop_reason
    assert all(getattr(e, "action", "allowed") == "allowed" for e in result.events if e.type == "guard_verdict")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bare_times, guarded_times = [], []
    for _ in range(args.repeat):  # interleaved, so load from other processes hits both alike
        bare_times.append(once(args.rounds, []))
        guarded_times.append(once(args.rounds, None))
    bare, guarded = min(bare_times), min(guarded_times)
    print(f"rounds: {args.rounds}, best of {args.repeat}")
    print(f"no detectors:      {bare * 1000:8.1f} ms ({bare / args.rounds * 1e6:7.0f} us/round)")
    print(f"default detectors: {guarded * 1000:8.1f} ms ({guarded / args.rounds * 1e6:7.0f} us/round)")
    print(f"ratio default/none: {guarded / bare:.2f}")
    print(f"detector overhead per round: {(guarded - bare) / args.rounds * 1e6:.0f} us")


if __name__ == "__main__":
    main()
