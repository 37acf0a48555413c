"""What one step of the overhead scenario costs, counted in instructions (deterministic, unlike
time on a shared machine): the difference of a 260-step and a 60-step loopwarden run under
valgrind's callgrind, over 200 steps. With a part left out, the difference to the whole is what
that part costs a step.

    python bench/bench_step.py                 # the whole step
    python bench/bench_step.py --without detectors --without novelty --without events

    python bench/bench_step.py --fixed         # what a run costs besides its steps, by part
    python bench/bench_step.py --gc [--after smolagents]   # what a run leaves the collector
    python bench/bench_step.py --misses [--after smolagents]   # a run's cache misses after another's

    python bench/bench_step.py --function loopwarden.loop:Run._settle [--function ...]   # up to 5
    python bench/bench_step.py --no-gc [...]   # the collector off in the counted process

(needs valgrind; each count takes about a minute). `--run N` runs the scenario once in this
process, the way callgrind runs it.

`--fixed` counts a run's fixed cost: each part of `frameworks.run_loopwarden` repeated RUNS times
in one process, less a process that only warms up, over RUNS. The parts: `declare` (the bench's
tool declared afresh on a new closure, as it is per run), `config` (`LoopConfig(budgets=...)`),
`model` (the `FunctionModel`), `agent` (`Agent(...)` from those), `run` (`agent.run` of an agent
built once, the model answering at once: run start, one model call, the ending, the result), and
`whole` (the bench's whole run of 0 steps: its world and meter too). `--part P --run N` runs one.

`--function MODULE:ATTR` counts what one call of a function costs a step, inclusive: the function is
put behind a C trampoline of its own (one distinct C symbol each, up to five at once), and the
inclusive count of that symbol in a 260-step run less a 60-step run is read with `callgrind_annotate`.
A counted call carries about 1,200 instructions of the trampoline, and one counted inside another
adds about 4,000 to it. Sync functions only (a coroutine function would be counted making its coroutine).

`--no-gc` turns the collector off in the counted process after its warm-up: a young collection
otherwise falls in whichever function allocates then, and how many fall in the counted steps
moves with what ran before them (one tree counted 304,600 and 314,000 a step minutes apart on
4 December); with it off a tree's counts agree within a few hundred.

`--gc` counts what CPython's young-generation counter (allocations of objects the collector
knows, less those freed) rises by in a 30-step loopwarden run, right after a run of its own or of
`--after F`'s (as overhead.py's first table interleaves them), the collector off for that run:
before the first model call, each step, at its highest, at its end. A young collection comes each
time the counter passes 700, and whichever run is going then pays for it, garbage another
framework left included: the fewer objects a run keeps while it goes, the fewer collections fall
in it. Then, the collector on, the collections that fell in such runs. Counts, not times.

`--misses` counts what a 30-step loopwarden run costs right after a run of its own or of `--after
F`'s (overhead.py's first table interleaves them): callgrind with a simulated cache, the last level
one core's 1 MB L2 (`--LL=1048576,8,64`), collecting only inside `sys.call_tracing`, through which
each measured run is driven (ROUNDS of them, each after one of the other's). The misses of the last
level a run are the first pass through the run's code and type data that the other run pushed out.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import gc
import importlib
import itertools
import operator
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

PARTS = ("detectors", "novelty", "events")
FIXED = ("declare", "config", "model", "agent", "run", "whole")
RUNS = 100
ROUNDS = 10
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

        # Only `built` (the four per-step events): `in_order` makes run_started and run_finished,
        # which the run's end needs (left out too, a run ended at its first step).
        EventStamper.built = staticmethod(lambda cls, values, unset=(): None)  # type: ignore[assignment,method-assign]


TRAMPOLINES: tuple[tuple[str, Any], ...] = (  # (C symbol, a call of g through it): one symbol per function counted
    ("sys_call_tracing", lambda g: sys.call_tracing(g, ())),
    ("_operator_call", lambda g: operator.call(g)),
    ("starmap_next", lambda g: next(itertools.starmap(g, ((),)))),
    ("functools_reduce", lambda g: functools.reduce(lambda _a, _b: g(), (0,), None)),
    ("methodcaller_call", lambda g: operator.methodcaller("__call__")(g)),
)


def behind_trampoline(target: str, through: Any) -> None:
    """Replace the function `module:Attr.path` names by one that calls it through `through`."""
    module, _, path = target.partition(":")
    owner: Any = importlib.import_module(module)
    *outer, name = path.split(".")
    for attribute in outer:
        owner = getattr(owner, attribute)
    found = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    inner = found.__func__ if isinstance(found, staticmethod) else found

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return through(lambda: inner(*args, **kwargs))

    setattr(owner, name, staticmethod(wrapped) if isinstance(found, staticmethod) else wrapped)


def run_once(steps: int, without: list[str], part: str | None = None, functions: tuple[str, ...] = ()) -> None:
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(Path(__file__).parent))
    import overhead
    from frameworks import RUNNERS

    for left in without:
        leave_out(left)
    for target, (_, through) in zip(functions, TRAMPOLINES, strict=False):
        behind_trampoline(target, through)
    # Under callgrind a quick tool call takes about 50 times as long; on a loaded machine one can
    # pass INLINE_LIMIT_S and, if the thread waited meanwhile, the tool goes to a worker thread for
    # good: the count then moved by up to 10,000 a step between runs (once 780,000). The limit is
    # lifted here so that every count is the zero-latency step the scenario describes.
    import loopwarden.tools

    loopwarden.tools.INLINE_LIMIT_S = 60.0

    async def go() -> Any:
        await RUNNERS["loopwarden"](overhead.scenario(5), 7)  # imports and first-call work, in both runs
        if os.environ.get("BENCH_STEP_NO_GC"):  # --no-gc: no young collection falls in a counted function
            gc.disable()
        if part is None:
            return await RUNNERS["loopwarden"](overhead.scenario(steps), steps + 2)
        await fixed_part(part, steps)  # with 0, the set-up alone (the base the parts are counted from)

    asyncio.run(go())


async def fixed_part(part: str, runs: int) -> None:
    """One part of `frameworks.run_loopwarden` (0 steps: the model answers at once), `runs` times."""
    import overhead
    from frameworks import RUNNERS, _tool_functions
    from scenarios import World

    from loopwarden import Agent, Budgets, FunctionModel, LoopConfig, ModelRequest, tool

    scenario = overhead.scenario(0)

    def answer(request: ModelRequest) -> str:
        return "done"

    def declare() -> list[Any]:
        return [tool(f) for f in _tool_functions(World(), scenario.tools)]

    def config() -> LoopConfig:
        return LoopConfig(budgets=Budgets(max_tool_rounds=2, max_model_calls=2))

    def model() -> FunctionModel:
        return FunctionModel(answer, name="scripted", keep_requests=False)

    declared, configured, scripted = declare(), config(), model()
    agent = Agent(scripted, declared, config=configured)
    for _ in range(runs):
        if part == "declare":
            declare()
        elif part == "config":
            config()
        elif part == "model":
            model()
        elif part == "agent":
            Agent(scripted, declared, config=configured)
        elif part == "run":
            await agent.run(scenario.prompt)
        else:
            await RUNNERS["loopwarden"](scenario, 2)


def gc_counts(after: str | None, steps: int = 30, rounds: int = 20) -> None:
    import gc
    import statistics

    warnings.simplefilter("ignore")
    sys.path.insert(0, str(Path(__file__).parent))
    import overhead
    import scenarios
    from frameworks import RUNNERS

    before = after or "loopwarden"
    marks: list[int] = []
    decide = scenarios.Meter.decide

    def marked(meter: Any, **kwargs: Any) -> Any:
        marks.append(gc.get_count()[0])
        return decide(meter, **kwargs)

    seen = [0, 0, 0]
    counting = [False]

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and counting[0]:
            seen[info["generation"]] += 1

    async def go() -> None:
        for name in dict.fromkeys(("loopwarden", before)):
            await RUNNERS[name](overhead.scenario(steps), steps + 2)  # imports and first calls
        rises: list[tuple[int, float, int, int]] = []
        for _ in range(rounds):
            await RUNNERS[before](overhead.scenario(steps), steps + 2)
            # Off for one run, so the counter's rise is all of it (no gc.collect: that empties
            # CPython's free lists, and a run would then count objects it otherwise reuses).
            gc.disable()
            marks.clear()
            start = gc.get_count()[0]
            await RUNNERS["loopwarden"](overhead.scenario(steps), steps + 2)
            end = gc.get_count()[0]
            gc.enable()
            step = statistics.median(b - a for a, b in itertools.pairwise(marks))
            rises.append((marks[0] - start, step, max(end, *marks) - start, end - start))
        first, step, highest, left = (statistics.median(r[i] for r in rises) for i in range(4))
        print(f"young-generation counter over a {steps}-step loopwarden run after {before}'s, collector off")
        low, high = min(r[2] for r in rises), max(r[2] for r in rises)
        print(f"(medians of {rounds}): +{first:g} before the first model call, +{step:g} a step, +{highest:g} at")
        print(f"its highest (+{low}-{high}), +{left:g} at its end (the counter stops at 0 when objects are freed)")
        gc.callbacks.append(collected)
        try:
            for _ in range(rounds):
                await RUNNERS[before](overhead.scenario(steps), steps + 2)
                counting[0] = True
                await RUNNERS["loopwarden"](overhead.scenario(steps), steps + 2)
                counting[0] = False
        finally:
            gc.callbacks.remove(collected)
        young, middle, old = (n / rounds for n in seen)
        print(f"collections in a loopwarden run right after {before}'s, collector on ({rounds} rounds):")
        print(f"{young:.2f} young, {middle:.2f} middle, {old:.2f} full a run")

    scenarios.Meter.decide = marked  # type: ignore[method-assign,assignment]
    asyncio.run(go())


def run_rounds(after: str, steps: int = 30) -> None:
    """ROUNDS loopwarden runs, each right after one of `after`'s, only they driven through
    `sys.call_tracing` (the symbol callgrind toggles collection on)."""
    warnings.simplefilter("ignore")
    sys.path.insert(0, str(Path(__file__).parent))
    import overhead
    from frameworks import RUNNERS

    import loopwarden.tools

    loopwarden.tools.INLINE_LIMIT_S = 60.0  # as in run_once
    import frameworks

    # A peer that runs in a worker thread (smolagents) runs in this one here: the same work and
    # caches, without valgrind serialising two threads (a round then took minutes at load 10).
    in_thread = getattr(frameworks, f"_run_{after}_sync", None)
    loop = asyncio.new_event_loop()

    def other() -> None:
        if in_thread is not None:
            in_thread(overhead.scenario(steps), steps + 2)
        else:
            loop.run_until_complete(RUNNERS[after](overhead.scenario(steps), steps + 2))

    loop.run_until_complete(RUNNERS["loopwarden"](overhead.scenario(steps), steps + 2))  # imports and first calls
    other()
    for _ in range(ROUNDS):
        other()
        sys.call_tracing(loop.run_until_complete, (RUNNERS["loopwarden"](overhead.scenario(steps), steps + 2),))
    loop.close()


def misses(after: str) -> dict[str, int]:
    """Callgrind's events a measured run (see run_rounds), cache simulated."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--cache-sim=yes"]
    command += ["--LL=1048576,8,64", "--toggle-collect=sys_call_tracing", "--collect-atstart=no"]
    command += [sys.executable, __file__, "--rounds", "--after", after]
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stderr
    names, counts = re.search(r"Events +: ([\w ]+)\n", out), re.search(r"Collected : ([\d ]+)\n", out)
    assert names and counts, out[-2000:]
    return {name: int(count) // ROUNDS for name, count in zip(names[1].split(), counts[1].split(), strict=True)}


def instructions(steps: int, without: list[str], part: str | None = None) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
    command += ["--run", str(steps), *(a for part in without for a in ("--without", part))]
    command += ["--part", part] if part else []
    # One hash seed for every count: string hashes change dict and set work by a few thousand a step.
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stderr
    found = re.search(r"Collected : (\d+)", out)
    assert found, out[-2000:]
    return int(found[1])


def per_function(functions: list[str]) -> dict[str, int]:
    """Each function's inclusive instructions a step (see `--function`), trampoline included."""
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    counted: dict[int, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for steps in (260, 60):
            out = f"{folder}/callgrind.{steps}"
            command = ["valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out}"]
            named = [a for f in functions for a in ("--function", f)]
            command += [sys.executable, __file__, "--run", str(steps), *named]
            subprocess.run(command, capture_output=True, text=True, check=True, env=env)
            annotated = subprocess.run(
                ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out], capture_output=True, text=True
            ).stdout
            counted[steps] = {}
            for symbol, _ in TRAMPOLINES[: len(functions)]:
                found = re.search(rf"^\s*([\d,]+) .*:{symbol} \[", annotated, re.MULTILINE)
                assert found, f"{symbol} not in the profile"
                counted[steps][symbol] = int(found[1].replace(",", ""))
    symbols = [symbol for symbol, _ in TRAMPOLINES]
    return {f: (counted[260][s] - counted[60][s]) // 200 for f, s in zip(functions, symbols, strict=False)}


def per_step(without: list[str]) -> int:
    return (instructions(260, without) - instructions(60, without)) // 200


def fixed() -> None:
    """Each part's instructions a run: RUNS of it less none, over RUNS (two counts at a time)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        base = pool.submit(instructions, 0, [], "whole")
        counts = {part: pool.submit(instructions, RUNS, [], part) for part in FIXED}
        print("| part of a run | instructions a run |\n|---|---:|")
        for part, count in counts.items():
            print(f"| {part} | {(count.result() - base.result()) // RUNS:,} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--without", action="append", choices=PARTS, default=[])
    parser.add_argument("--run", type=int)
    parser.add_argument("--part", choices=FIXED)
    parser.add_argument("--fixed", action="store_true")
    parser.add_argument("--gc", action="store_true")
    parser.add_argument("--after")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--rounds", action="store_true")
    parser.add_argument("--function", action="append", default=[])
    parser.add_argument("--no-gc", action="store_true")
    args = parser.parse_args()
    if args.no_gc:  # read by the counted processes (run_once)
        os.environ["BENCH_STEP_NO_GC"] = "1"
    if len(args.function) > len(TRAMPOLINES):
        parser.error(f"at most {len(TRAMPOLINES)} functions at once")
    if args.rounds:
        run_rounds(args.after or "loopwarden")
        return 0
    if args.misses:
        print("| a 30-step loopwarden run after | Ir | I1 misses | D1 misses | LL misses (1 MB) |")
        print("|---|---:|---:|---:|---:|")
        for before in dict.fromkeys(("loopwarden", args.after or "loopwarden")):
            m = misses(before)
            l1, ll = m["I1mr"], m["ILmr"] + m["DLmr"] + m["DLmw"]
            print(f"| {before} | {m['Ir']:,} | {l1:,} | {m['D1mr'] + m['D1mw']:,} | {ll:,} |")
        return 0
    if args.gc:
        gc_counts(args.after)
        return 0
    if args.run is not None:
        run_once(args.run, args.without, args.part, tuple(args.function))
        return 0
    if args.function:
        print("| function (one call, inclusive, trampoline included) | instructions per step |\n|---|---:|")
        for function, count in per_function(args.function).items():
            print(f"| `{function}` | {count:,} |")
        return 0
    if args.fixed:
        fixed()
        return 0
    whole = per_step([])
    print(f"| part of a step | instructions per step |\n|---|---:|\n| the whole step | {whole:,} |")
    for part in args.without:
        print(f"| {part} | {whole - per_step([part]):,} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
