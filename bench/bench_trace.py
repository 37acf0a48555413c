"""What tracing costs: the same healthy scripted run (N reads, then an answer) untraced and with
`Agent(trace="runs.db")` (every event and every model exchange committed to SQLite before it is
streamed), measured in the same process, interleaved. An instant model that never yields lets
the recorder commit many rounds at once; the second pair of figures uses a model that yields to
the event loop once per call, as a real client does, so there is at least one commit per call.
The model and tools are instant, so the ratio is the worst case: a real model call takes far
longer than the commits next to it. Wall and CPU time are both printed (CPU: the process's, every
thread's, so the background WAL checkpoints count); the CPU ratio is the steadier one on a
shared machine.

    python bench/bench_trace.py [--rounds 100] [--repeat 5]
    python bench/bench_trace.py --instructions     # the same four runs in instructions (valgrind)
    python bench/bench_trace.py --parts [--instructions]   # where the traced extra goes (instant model)
    python bench/bench_trace.py --tools 12 [--instructions]  # the agent offers 11 more tools (never called)

With `--instructions`, each run is counted under valgrind's callgrind (every thread, the
checkpoints' too): the difference of a process that makes 4 runs and one that makes 1, over 3,
with the hash seed fixed. Load does not move these counts; they leave out what the kernel does
(the WAL writes, the file locks), which wall and CPU time include. About a minute per count.

With `--parts`, the instant model's traced run is measured with its parts left out one after
another (each by monkeypatching, in this process only): the SQLite writes (the events' dicts and
JSON still made), then the events' dicts and JSON too, then the model exchanges (their request
and reply JSON and rows); what is left against the untraced run is the per-run set-up (the traced
model wrapping the model, the run's writer) and the recorder's pass-through. Each difference is
that part's cost. (A level that swapped the recorder for a plain `async for` was dropped on
4 December 2026: a traced `Agent.run` keeps its step events as an untraced one does, and a plain
recorder built every event, so its figure said nothing.)

With `--tools N`, the agent offers N tools, `read_lines` and N - 1 others of the size an
application's tools have (a docstring and four parameters), which the model never calls: every
request carries their schemas, which the store keeps once per run (migration 5).

Also prints how much the stored requests take against storing each request whole (the history
grows every turn; rows keep only what was added, so the store grows linearly), and, for each
model, a traced run's commits and the pages they wrote to the log: the yielding model's run
commits once per call (what it told before each wait is made durable before it is streamed),
and each commit writes the run's row, page 1 (the file grew), and a leaf of each table it adds
to (and its parent, when the leaf is new) and of any separate key it has, however few rows it
adds. On SQLite the events' batch table has none since migration 7 (its key is the rowid).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from healthy_run import read_lines, reader

from loopwarden import Agent, Budgets, LoopConfig, Tool, tool
from loopwarden.trace import checkpoint, exchanges, rows
from loopwarden.trace.exchanges import exchange_rows, load_exchanges
from loopwarden.trace.store import RunStore

PARTS = ("traced", "no SQLite", "no events' JSON", "no exchanges", "untraced")
"""--parts: each leaves out what the one before it kept (see leave_out)."""


def leave_out(level: int) -> None:
    """Leave out the first `level` parts of tracing (PARTS[1:]), for --parts."""
    if level >= 1:  # the events' dicts and JSON made as a commit makes them, nothing written

        def json_only(self: RunStore, run_id: str, events: list[Any], **_: Any) -> list[int]:
            rows.event_lines(events)  # as insert_events makes it
            return list(range(len(events)))

        RunStore.append_events = json_only  # type: ignore[assignment,method-assign]
    if level >= 2:
        RunStore.append_events = lambda self, run_id, events, **_: list(range(len(events)))  # type: ignore[method-assign]
    if level >= 3:

        def keep_nothing(*_: Any) -> None:
            return None

        exchanges.TracedModel._keep = keep_nothing  # type: ignore[assignment,method-assign]


def offered(count: int) -> list[Tool]:
    """`read_lines` and `count - 1` tools the model never calls, each of an application tool's size."""
    tools = [read_lines]
    for i in range(1, count):

        def search(offset: int, limit: int = 20, pattern: str = "", case_sensitive: bool = False) -> str:
            return ""

        search.__name__ = f"search_{i}"
        search.__doc__ = (
            f"Search part {i} of the log for a pattern from an offset: the matching lines with their"
            " numbers, at most `limit` of them, case-insensitive unless asked."
        )
        tools.append(tool(search))
    return tools


TOOLS = 1
"""How many tools the agent offers (--tools)."""


def once(rounds: int, db: Path | None, waits: bool = False) -> tuple[float, float, str]:
    """(wall, cpu, run id) of one run; cpu is the process's, every thread's (the checkpoints' too)."""
    config = LoopConfig(budgets=Budgets(max_tool_rounds=rounds + 5, max_model_calls=rounds + 5))
    agent = Agent(reader(rounds, waits=waits), offered(TOOLS), config=config, trace=str(db) if db else False)
    start, cpu = time.perf_counter(), time.process_time()
    result = asyncio.run(agent.run("read the log"))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert result.status == "completed" and result.totals.tool_executions == rounds, result.stop_reason
    return elapsed, cpu, result.run_id


def commits(rounds: int, waits: bool) -> tuple[int, float]:
    """A traced run's commits and the pages they wrote to the log, per commit (its store's
    earlier run checkpointed first; no checkpoint during the run, so the log holds every frame)."""
    made = 0
    append_events, request = RunStore.append_events, checkpoint.request

    def counting(self: RunStore, *args: Any, **kwargs: Any) -> list[int] | None:
        nonlocal made
        done = append_events(self, *args, **kwargs)
        made += done is not None
        return done

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        once(rounds, db, waits=waits)  # the store made and its connections open
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        RunStore.append_events, checkpoint.request = counting, lambda path: None  # type: ignore[method-assign]
        try:
            once(rounds, db, waits=waits)
        finally:
            RunStore.append_events, checkpoint.request = append_events, request  # type: ignore[method-assign]
        frames = (os.path.getsize(f"{db}-wal") - 32) / (24 + page)  # the log's header, then frames
    return made, frames / max(made, 1)


def runs(count: int, rounds: int, traced: bool, waits: bool) -> None:
    """`count` runs in this process, one store for all (as callgrind runs them)."""
    # Under callgrind a quick tool call takes ~50 times as long: on a loaded machine one could pass
    # INLINE_LIMIT_S and go to a worker thread for good, which changes when the recorder commits
    # (a run that waits on a thread is a commit) and moved counts by ~1 M a run. Lifted, as
    # bench_step.py does, so each count is the zero-latency run the bench describes.
    import loopwarden.tools

    loopwarden.tools.INLINE_LIMIT_S = 60.0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(count):
            once(rounds, Path(tmp) / "runs.db" if traced else None, waits=waits)


def wall_of(rounds: int, level: int) -> None:
    """One --parts process: prints the best wall time of 5 runs after 2 to warm up."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db" if level < len(PARTS) - 1 else None
        times = [once(rounds, db)[0] for _ in range(7)][2:]
    print(min(times))


def instructions(runs: int, rounds: int, traced: bool, waits: bool, leaving_out: int = 0) -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
    command += ["--run", str(runs), "--rounds", str(rounds)] + ["--traced"] * traced + ["--waits"] * waits
    command += ["--leave-out", str(leaving_out), "--tools", str(TOOLS)]
    env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stderr
    found = re.search(r"Collected : (\d+)", out)
    assert found, out[-2000:]
    return int(found[1])


def count_instructions(rounds: int) -> None:
    print(f"rounds: {rounds}, tools: {TOOLS}, instructions per run ((4 runs - 1 run) / 3, callgrind, every thread)")
    for waits, title in ((False, "an instant model"), (True, "a model that yields to the event loop once per call")):
        bare, traced = (
            (instructions(4, rounds, t, waits) - instructions(1, rounds, t, waits)) // 3 for t in (False, True)
        )
        print(f"{title}:\n  untraced: {bare:,}\n  traced:   {traced:,}\n  ratio traced/untraced: {traced / bare:.3f}")


def parts(rounds: int, repeat: int, count: bool) -> None:
    """--parts: the instant model's traced run with its parts left out one after another."""
    figures: dict[int, list[float]] = {}
    if count:
        print(f"rounds: {rounds}, instant model, instructions per run ((4 runs - 1 run) / 3, callgrind)")
        for level, _ in enumerate(PARTS):
            traced = level < len(PARTS) - 1
            counts = [instructions(n, rounds, traced, False, level) for n in (4, 1)]
            figures[level] = [(counts[0] - counts[1]) / 3]
        unit, scale = "M instructions", 1e-6
    else:  # each level in its own process (what is left out stays out), interleaved
        print(f"rounds: {rounds}, instant model, wall per run: best (median) of {repeat} processes of 5 runs")
        command = [sys.executable, __file__, "--rounds", str(rounds), "--tools", str(TOOLS), "--wall", "--leave-out"]
        for _ in range(repeat):
            for level, _ in enumerate(PARTS):
                out = subprocess.run([*command, str(level)], capture_output=True, text=True, check=True).stdout
                figures.setdefault(level, []).append(float(out))
        unit, scale = "ms wall", 1e3
    before: tuple[float, float] | None = None
    for level, name in enumerate(PARTS):
        best, median = min(figures[level]) * scale, statistics.median(figures[level]) * scale
        spread = len(figures[level]) > 1  # counts are one figure each: no median to show
        cost = ""
        if before is not None:
            cost = f"  (what this leaves out: {before[0] - best:.2f}"
            cost += f" ({before[1] - median:.2f}))" if spread else ")"
        print(f"  {name:16s} {best:8.2f}" + (f" ({median:8.2f})" if spread else "") + f" {unit}{cost}")
        before = best, median


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # what --instructions runs under callgrind
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--waits", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--parts", action="store_true")
    parser.add_argument("--tools", type=int, default=1, help="tools the agent offers (1: read_lines only)")
    parser.add_argument("--leave-out", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--wall", action="store_true", help=argparse.SUPPRESS)  # one --parts process
    args = parser.parse_args()
    global TOOLS
    TOOLS = args.tools
    leave_out(args.leave_out)
    if args.wall:
        return wall_of(args.rounds, args.leave_out)
    if args.run is not None:
        return runs(args.run, args.rounds, args.traced, args.waits)
    if args.parts:
        return parts(args.rounds, args.repeat, args.instructions)
    if args.instructions:
        return count_instructions(args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        times: dict[tuple[bool, bool], list[tuple[float, float]]] = {}
        run_id = ""
        for _ in range(args.repeat):  # interleaved, so load from other processes hits all alike
            for waits in (False, True):
                for traced in (False, True):
                    wall, cpu, ran = once(args.rounds, db if traced else None, waits=waits)
                    times.setdefault((waits, traced), []).append((wall, cpu))
                    run_id = ran if traced and not waits else run_id
        best = {key: (min(w for w, _ in runs), min(c for _, c in runs)) for key, runs in times.items()}
        store = RunStore(db)
        calls = len(load_exchanges(store, run_id))
        whole = sum(len(x.request.model_dump_json()) for x in load_exchanges(store, run_id))
        stored = sum(len(row["request"]) for row in exchange_rows(store, run_id))
    print(f"rounds: {args.rounds} ({calls} model calls), tools: {TOOLS}, best of {args.repeat}, wall and cpu")
    for waits, title in ((False, "an instant model"), (True, "a model that yields to the event loop once per call")):
        (bare, bare_cpu), (kept, traced_cpu) = best[(waits, False)], best[(waits, True)]
        print(f"{title}:")
        print(f"  untraced: {bare * 1000:8.1f} ms wall, {bare_cpu * 1000:8.1f} ms cpu")
        print(f"  traced:   {kept * 1000:8.1f} ms wall, {traced_cpu * 1000:8.1f} ms cpu")
        per_call = (kept - bare) / calls * 1e6
        print(f"  ratio traced/untraced: {kept / bare:.2f} wall, {traced_cpu / bare_cpu:.2f} cpu"
              f" ({per_call:.0f} us wall per model call)")  # fmt: skip
    print(f"stored request bytes / whole requests: {stored / whole:.3f} ({stored} of {whole})")
    for waits, title in ((False, "instant model"), (True, "yielding model")):
        made, pages = commits(args.rounds, waits)
        print(f"{title}: {made} commits a traced run, {pages:.1f} log pages a commit")


if __name__ == "__main__":
    main()
