"""What tracing costs: the same healthy scripted run (N reads, then an answer) untraced and with
`Agent(trace="runs.db")` (every event and every model exchange committed to SQLite before it is
streamed), measured in the same process, interleaved. An instant model that never yields lets
the recorder commit many rounds at once; the second pair of figures uses a model that yields to
the event loop once per call, as a real client does, so there is at least one commit per call.
The model and tools are instant, so the ratio is the worst case: a real model call takes far
longer than the commits next to it.

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


def once(rounds: int, db: Path | None, waits: bool = False) -> tuple[float, str]:
    config = LoopConfig(budgets=Budgets(max_tool_rounds=rounds + 5, max_model_calls=rounds + 5))
    agent = Agent(reader(rounds, waits=waits), [read_lines], config=config, trace=str(db) if db else False)
    start = time.perf_counter()
    result = asyncio.run(agent.run("read the log"))
    elapsed = time.perf_counter() - start
    assert result.status == "completed" and result.totals.tool_executions == rounds, result.stop_reason
    return elapsed, result.run_id


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        bare_times, traced_times, run_id = [], [], ""
        waiting_bare, waiting_traced = [], []
        for _ in range(args.repeat):  # interleaved, so load from other processes hits all alike
            bare_times.append(once(args.rounds, None)[0])
            elapsed, run_id = once(args.rounds, db)
            traced_times.append(elapsed)
            waiting_bare.append(once(args.rounds, None, waits=True)[0])
            waiting_traced.append(once(args.rounds, db, waits=True)[0])
        bare, traced = min(bare_times), min(traced_times)
        w_bare, w_traced = min(waiting_bare), min(waiting_traced)
        store = RunStore(db)
        calls = len(load_exchanges(store, run_id))
        whole = sum(len(x.request.model_dump_json()) for x in load_exchanges(store, run_id))
        stored = (
            sqlite3.connect(db)
            .execute("SELECT SUM(LENGTH(request)) FROM model_exchanges WHERE run_id = ?", (run_id,))
            .fetchone()[0]
        )
    print(f"rounds: {args.rounds} ({calls} model calls), best of {args.repeat}")
    print(f"untraced: {bare * 1000:8.1f} ms")
    print(f"traced:   {traced * 1000:8.1f} ms ({(traced - bare) / calls * 1e6:.0f} us per model call)")
    print(f"ratio traced/untraced: {traced / bare:.2f}")
    print("a model that yields to the event loop once per call (as a real client does; a commit per model call):")
    print(f"  untraced: {w_bare * 1000:8.1f} ms, traced: {w_traced * 1000:8.1f} ms")
    per_call = (w_traced - w_bare) / calls * 1e6
    print(f"  ratio traced/untraced: {w_traced / w_bare:.2f} ({per_call:.0f} us per model call)")
    print(f"stored request bytes / whole requests: {stored / whole:.3f} ({stored} of {whole})")


if __name__ == "__main__":
    main()
