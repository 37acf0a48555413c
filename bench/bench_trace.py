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

Also prints how much the stored requests take against storing each request whole (the history
grows every turn; rows keep only what was added, so the store grows linearly).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path

from healthy_run import read_lines, reader

from loopwarden import Agent, Budgets, LoopConfig
from loopwarden.trace.exchanges import load_exchanges
from loopwarden.trace.store import RunStore


def once(rounds: int, db: Path | None, waits: bool = False) -> tuple[float, float, str]:
    """(wall, cpu, run id) of one run; cpu is the process's, every thread's (the checkpoints' too)."""
    config = LoopConfig(budgets=Budgets(max_tool_rounds=rounds + 5, max_model_calls=rounds + 5))
    agent = Agent(reader(rounds, waits=waits), [read_lines], config=config, trace=str(db) if db else False)
    start, cpu = time.perf_counter(), time.process_time()
    result = asyncio.run(agent.run("read the log"))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert result.status == "completed" and result.totals.tool_executions == rounds, result.stop_reason
    return elapsed, cpu, result.run_id


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
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
        stored = (
            sqlite3.connect(db)
            .execute("SELECT SUM(LENGTH(request)) FROM model_exchanges WHERE run_id = ?", (run_id,))
            .fetchone()[0]
        )
    print(f"rounds: {args.rounds} ({calls} model calls), best of {args.repeat}, wall and cpu")
    for waits, title in ((False, "an instant model"), (True, "a model that yields to the event loop once per call")):
        (bare, bare_cpu), (traced, traced_cpu) = best[(waits, False)], best[(waits, True)]
        print(f"{title}:")
        print(f"  untraced: {bare * 1000:8.1f} ms wall, {bare_cpu * 1000:8.1f} ms cpu")
        print(f"  traced:   {traced * 1000:8.1f} ms wall, {traced_cpu * 1000:8.1f} ms cpu")
        per_call = (traced - bare) / calls * 1e6
        print(f"  ratio traced/untraced: {traced / bare:.2f} wall, {traced_cpu / bare_cpu:.2f} cpu"
              f" ({per_call:.0f} us wall per model call)")  # fmt: skip
    print(f"stored request bytes / whole requests: {stored / whole:.3f} ({stored} of {whole})")


if __name__ == "__main__":
    main()
