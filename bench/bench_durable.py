"""Durable runs at scale, on a real Postgres, with real processes: one `loopwarden serve` API
process and two `loopwarden worker` processes. RUNS runs of the demo job (turns model calls of
`--model-delay` seconds each) are submitted at once and every run's events are read live over
SSE from the API process.

    LOOPWARDEN_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:54329/postgres \\
        python bench/bench_durable.py [--runs 200] [--model-delay 0.1] [--turns 3]

(`bash .ci/setup.d/postgres.sh` starts such a server.) Prints runs/s from the first worker ready
to the last run finished; p50/p99 event delivery latency (event stamped by the worker -> parsed
by the SSE client; same machine, same clock) and the part of it after the commit's NOTIFY (the
bench listens too); the time each submission took; and the cost of durability per step (a model
call or a tool execution) as a ratio to the plain in-process loop, measured in this process on the same
demo agent with an instant model: plain `Agent.run` vs the same run as a DBOS workflow on SQLite
and on Postgres (each in a child process: DBOS is one per process).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from durable_kit import demo_folder, fresh_database, serve, worker

OVERHEAD_RUNS = 30
Delivery = tuple[str, float, float]
"""(run id, stamped by the worker, parsed by the SSE client), wall clock, same machine."""
SUBMIT_S: list[float] = []
"""Seconds from each POST /api/runs to its 202 (all RUNS posted at once)."""


async def submit_and_stream(
    client: httpx.AsyncClient, base: str, folder: str, latencies: list[Delivery], opened: asyncio.Queue[str | None]
) -> None:
    """Submit, then read the run's events live (`opened` hears when the stream is open, or None
    when this task failed, so the bench stops instead of waiting for it)."""
    try:
        await _submit_and_stream(client, base, folder, latencies, opened)
    except BaseException:
        await opened.put(None)
        raise


async def _submit_and_stream(
    client: httpx.AsyncClient, base: str, folder: str, latencies: list[Delivery], opened: asyncio.Queue[str | None]
) -> None:
    began = time.monotonic()
    response = await client.post(f"{base}/api/runs", json={"folder": folder})
    assert response.status_code == 202, response.text
    SUBMIT_S.append(time.monotonic() - began)
    run_id = response.json()["id"]
    async with client.stream("GET", f"{base}/api/runs/{run_id}/events") as events:
        async for line in events.aiter_lines():
            if line.startswith('data: {"type"'):
                received, event = time.time(), json.loads(line[6:])
                if event["type"] == "run_queued":
                    await opened.put(run_id)
                else:
                    latencies.append((run_id, event["ts"], received))
            elif line == "event: end":
                return


class Notifications:
    """The bench's own `LISTEN loopwarden_events`: when each run's commits were announced, which
    splits an event's delivery time at its commit (worker side before, API side after)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.seen: dict[str, list[float]] = {}
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("LISTEN loopwarden_events")
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        try:
            for note in self.conn.notifies():
                self.seen.setdefault(note.payload, []).append(time.time())
        except Exception:  # closed at the end
            return

    def split(self, deliveries: list[Delivery]) -> tuple[list[float], list[float]]:
        """Per event, the API side's share bounded by the announcements around its commit: after
        the last one before it was received (at least) and the first one after it was stamped
        (at most); they coincide when one commit fell in between."""
        least, most = [], []
        for run_id, stamped, received in deliveries:
            times = self.seen.get(run_id, [])
            before = times[max(0, bisect.bisect_right(times, received) - 1)] if times else received
            after = times[min(len(times) - 1, bisect.bisect_left(times, stamped))] if times else stamped
            least.append(max(0.0, received - before))
            most.append(max(0.0, received - after))
        return least, most


async def scale(base: str, folders: list[Path], url: str, tmp: Path) -> tuple[float, list[Delivery]]:
    """All runs are submitted and their streams open before the workers start: then RUNS runs
    are ready at once, and every event after `run_queued` is delivered to a waiting client."""
    latencies: list[Delivery] = []
    opened: asyncio.Queue[str | None] = asyncio.Queue()
    # No idle connection is reused: one the server closes (keep-alive timeout) as a request goes out
    # would fail that request (a client-side race, not what is measured).
    limits = httpx.Limits(max_connections=len(folders) + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600, read=900), limits=limits) as client:
        streams = [asyncio.create_task(submit_and_stream(client, base, f.name, latencies, opened)) for f in folders]
        for _ in folders:
            if await opened.get() is None:
                await asyncio.gather(*streams)  # raises the failed task's error
        with ExitStack() as first, ExitStack() as second:

            def start(stack: ExitStack, name: str) -> float:
                stack.enter_context(worker(tmp / name, url))
                return time.monotonic()

            ready = await asyncio.gather(asyncio.to_thread(start, first, "w1"), asyncio.to_thread(start, second, "w2"))
            await asyncio.gather(*streams)
            elapsed = time.monotonic() - min(ready)
    return elapsed, latencies


def bench_scale(runs: int, delay: float, turns: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-durable-"))
    allowed = tmp / "allowed"
    folders = [demo_folder(allowed, f"run{i:04d}", turns=turns, model_delay_s=delay) for i in range(runs)]
    with fresh_database() as url, serve(tmp / "api", allowed, database_url=url, concurrency=runs) as (_, base):
        notifications = Notifications(url)
        elapsed, deliveries = asyncio.run(scale(base, folders, url, tmp))
        notifications.conn.close()
        statuses = {r["status"] for r in httpx.get(f"{base}/api/runs", params={"limit": 500}, timeout=60).json()}
    assert statuses == {"completed"}, statuses
    latencies = sorted(received - stamped for _, stamped, received in deliveries)
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    least, most = (sorted(side) for side in notifications.split(deliveries))
    print(f"{runs} runs x {turns + 1} model calls of {delay * 1000:.0f} ms, 1 API + 2 workers on Postgres:")
    print(f"  {runs / elapsed:.1f} runs/s ({elapsed:.1f} s from the first worker ready to the last run ended;")
    print(f"  one run alone needs at least {(turns + 1) * delay:.1f} s)")
    SUBMIT_S.sort()
    print(
        f"  POST /api/runs to 202 (all {runs} at once): p50 {statistics.median(SUBMIT_S) * 1000:.0f} ms,"
        f" max {SUBMIT_S[-1] * 1000:.0f} ms"
    )
    print(f"  event delivery over SSE (stamped by a worker -> parsed by the client): p50 {p50 * 1000:.0f} ms,")
    print(f"  p99 {p99 * 1000:.0f} ms ({len(latencies)} events); of which after the commit's NOTIFY (the API")
    median = f"{ms(statistics.median(least))}-{ms(statistics.median(most))}"
    tail = f"{ms(percentile(least, 0.99))}-{ms(percentile(most, 0.99))}"
    print(f"  process: wake, read, send): p50 {median} ms, p99 {tail} ms")
    print("  (a range: bounded by the announcements around each event's commit, Notifications.split)")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def percentile(values: list[float], share: float) -> float:
    return values[int(share * (len(values) - 1))]


def overhead_child(backend: str, url: str | None, steps: int) -> float:
    """Seconds per step of the demo run as a DBOS workflow (in this process)."""
    from loopwarden.durable.database import Database
    from loopwarden.durable.engine import launch
    from loopwarden.durable.workflow import run_workflow
    from loopwarden.server.jobs import RunRequest

    tmp = Path(tempfile.mkdtemp(prefix="bench-durable-"))
    folder = demo_folder(tmp / "allowed", "overhead", turns=6)
    engine = launch(Database.resolve(tmp / "state", url or ""), executes_runs=True)
    request = RunRequest(data_dir=folder, out_dir=tmp / "out")

    async def runs() -> float:
        started = time.perf_counter()
        for _ in range(OVERHEAD_RUNS):
            run = engine.store.create_run()
            from dbos import DBOS, SetWorkflowID

            with SetWorkflowID(run.id):
                handle = await DBOS.start_workflow_async(
                    run_workflow, "loopwarden.durable.demo:demo_job", request, run.id
                )
            await handle.get_result()
        return time.perf_counter() - started

    elapsed = asyncio.run(runs())
    engine.shutdown()
    return elapsed / (OVERHEAD_RUNS * steps)


def plain_per_step() -> tuple[float, int]:
    """Seconds per step of the plain loop, and the steps of one run (model calls + tool executions)."""
    from loopwarden import Agent
    from loopwarden.durable.demo import DemoModel, DemoSpec, demo_tools

    spec = DemoSpec(turns=6)
    agent = Agent(DemoModel(spec), demo_tools(spec), trace=False)

    async def runs() -> tuple[float, int]:
        started = time.perf_counter()
        for _ in range(OVERHEAD_RUNS):
            result = await agent.run("Work through the items.")
        return time.perf_counter() - started, result.totals.model_calls + result.totals.tool_executions

    elapsed, steps = asyncio.run(runs())
    return elapsed / (OVERHEAD_RUNS * steps), steps


def bench_overhead(url: str | None) -> None:
    plain, steps = plain_per_step()
    print(f"per step (model call or tool execution), demo agent with an instant model, {OVERHEAD_RUNS} runs:")
    print(f"  plain in-process loop: {plain * 1e6:.0f} us")
    for backend in ("sqlite", "postgres"):
        if backend == "postgres" and url is None:
            continue
        command = [sys.executable, __file__, "--overhead-child", backend, "--steps", str(steps)]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        durable = float(out)
        print(f"  durable on {backend}: {durable * 1e6:.0f} us = {durable / plain:.1f}x the plain loop")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--model-delay", type=float, default=0.1)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--overhead-child", choices=["sqlite", "postgres"])
    parser.add_argument("--steps", type=int, default=0)
    args = parser.parse_args()
    if args.overhead_child:
        if args.overhead_child == "sqlite":
            print(overhead_child("sqlite", None, args.steps))
        else:
            with fresh_database() as url:
                print(overhead_child("postgres", url, args.steps))
        return
    import os

    url = os.environ.get("LOOPWARDEN_TEST_POSTGRES_URL")
    if not args.skip_overhead:
        bench_overhead(url)
    if not args.skip_scale:
        if url is None:
            sys.exit("the scale part needs Postgres: set LOOPWARDEN_TEST_POSTGRES_URL (bash .ci/setup.d/postgres.sh)")
        bench_scale(args.runs, args.model_delay, args.turns)


if __name__ == "__main__":
    main()
