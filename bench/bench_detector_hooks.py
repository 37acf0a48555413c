"""The loop detectors' own cost per round, without the loop around them: the healthy run of
bench_detectors.py is recorded once (its call records, results and replies), then replayed into
fresh default detectors (and the run's novelty clock, where the runtime has one) many times.
Nothing else runs in the timed part, and it is timed in CPU time of the process, so the figure
moves little with the machine's load; the best of `--repeat` is printed, in microseconds per round.

    python bench/bench_detector_hooks.py [--rounds 150] [--repeat 15]

Run it on two checkouts (`PYTHONPATH=<checkout>/src`) to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import time
from typing import Any

from healthy_run import read_lines, reader

from loopwarden import Agent, Budgets, LoopConfig
from loopwarden.guard import build_detectors
from loopwarden.state import RunState

NARRATION = "Reading block {n}; so far the flow keeps rising."


def record(rounds: int) -> list[tuple[int, str, list[Any]]]:
    """(turn, reply text, that turn's call records) of the healthy run."""
    config = LoopConfig(budgets=Budgets(max_tool_rounds=rounds + 5, max_model_calls=rounds + 5))
    agent = Agent(reader(rounds, NARRATION), [read_lines], config=config)
    result = asyncio.run(agent.run("read the log"))
    by_turn: dict[int, list[Any]] = {}
    for r in result.state.records:
        by_turn.setdefault(r.turn, []).append(r)
    texts = {reply.turn: reply.text for reply in result.state.replies}
    return [(turn, texts.get(turn, ""), by_turn.get(turn, [])) for turn in sorted(texts)]


def replay(turns: list[tuple[int, str, list[Any]]]) -> float:
    try:
        novelty_module: Any = importlib.import_module("loopwarden.guard.novelty")
    except ImportError:
        novelty_module = None
    state = RunState()
    novelty = novelty_module.novelty_of(state) if novelty_module else None
    detectors = build_detectors(None)
    start = time.process_time()  # CPU time: waiting for a loaded machine is not the detectors' cost
    for turn, text, records in turns:
        state.add_reply(turn, text, len(records), True)
        if novelty is not None and text:
            novelty.observe_text(text)
        for d in detectors:
            d.on_text(turn, text, True, state)
        if not records:
            continue
        for d in detectors:
            d.on_calls(turn, records, state)
        for r in records:
            state.add(r)
        if novelty is not None:
            novelty.observe_results(turn, records, state)
        for d in detectors:
            d.on_results(turn, records, state)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    turns = record(args.rounds)
    best = min(replay(turns) for _ in range(args.repeat))
    print(f"rounds: {len(turns)}, best of {args.repeat}: {best * 1e6 / len(turns):.1f} us per round in the detectors")


if __name__ == "__main__":
    main()
