"""What one step of the overhead scenario costs, counted in instructions (deterministic, unlike
time on a shared machine): the difference of a 260-step and a 60-step loopwarden run under
valgrind's callgrind, over 200 steps. With a part left out, the difference to the whole is what
that part costs a step.

    python bench/bench_step.py                 # the whole step
    python bench/bench_step.py --without detectors --without novelty --without events

(needs valgrind; each count takes about a minute). `--run N` runs the scenario once in this
process, the way callgrind runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

PARTS = ("detectors", "novelty", "events")
"""detectors: none built (the default five off); novelty: a result's content key is a counter
(no stripping, no encoding); events: the four per-step events are not built (None; their fields still gathered)."""


def leave_out(part: str) -> None:
    if part == "detectors":
        import loopwarden.loop as loop

        loop.build_detectors = lambda *args, **kwargs: []  # type: ignore[assignment]
    elif part == "novelty":
        import loopwarden.guard.novelty as novelty

        counter = itertools.count()
        novelty.content_key = lambda result: str(next(counter))  # type: ignore[assignment]
    elif part == "events":
        from loopwarden.events import EventStamper

        EventStamper.trusted = lambda self, cls, **fields: None  # type: ignore[assignment,method-assign,return-value]
        EventStamper.in_order = lambda self, cls, fields, unset=(): None  # type: ignore[assignment,method-assign,return-value]
        EventStamper.built = staticmethod(lambda cls, values, unset=(): None)  # type: ignore[assignment,method-assign]


def run_once(steps: int, without: list[str]) -> None:
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(Path(__file__).parent))
    import overhead
    from frameworks import RUNNERS

    for part in without:
        leave_out(part)
    # Under callgrind a quick tool call takes about 50 times as long; on a loaded machine one can
    # pass INLINE_LIMIT_S and, if the thread waited meanwhile, the tool goes to a worker thread for
    # good: the count then moved by up to 10,000 a step between runs (once 780,000). The limit is
    # lifted here so that every count is the zero-latency step the scenario describes.
    import loopwarden.tools

    loopwarden.tools.INLINE_LIMIT_S = 60.0

    async def go() -> Any:
        await RUNNERS["loopwarden"](overhead.scenario(5), 7)  # imports and first-call work, in both runs
        return await RUNNERS["loopwarden"](overhead.scenario(steps), steps + 2)

    asyncio.run(go())


def instructions(steps: int, without: list[str]) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
    command += ["--run", str(steps), *(a for part in without for a in ("--without", part))]
    # One hash seed for every count: string hashes change dict and set work by a few thousand a step.
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stderr
    found = re.search(r"Collected : (\d+)", out)
    assert found, out[-2000:]
    return int(found[1])


def per_step(without: list[str]) -> int:
    return (instructions(260, without) - instructions(60, without)) // 200


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--without", action="append", choices=PARTS, default=[])
    parser.add_argument("--run", type=int)
    args = parser.parse_args()
    if args.run is not None:
        run_once(args.run, args.without)
        return 0
    whole = per_step([])
    print(f"| part of a step | instructions per step |\n|---|---:|\n| the whole step | {whole:,} |")
    for part in args.without:
        print(f"| {part} | {whole - per_step([part]):,} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
