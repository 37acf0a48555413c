"""What the run service costs, as ratios against baselines measured in the same run.

    python bench/bench_server.py

1. Committing an event through `RunStore.append_event` (numbering, run row update, BEGIN
   IMMEDIATE) against a bare autocommit INSERT into the same kind of WAL database.
2. Live delivery over SSE on a real uvicorn: time from an event being yielded by a job to a
   client having parsed it, against a plain GET round trip to the same server.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from loopwarden.events import Event, EventStamper
from loopwarden.report.events import ReportFinished
from loopwarden.server.app import create_app
from loopwarden.server.settings import ServerSettings
from loopwarden.trace.store import RunStore
from server_jobs import serve_in_thread

N_EVENTS = 2000
N_LIVE = 200


def bench_append(tmp: Path) -> tuple[float, float]:
    store = RunStore(tmp / "store.db")
    run = store.create_run()
    stamp = EventStamper(run.id)
    events = [stamp(Event, type="note", text="x" * 200) for _ in range(N_EVENTS)]
    started = time.perf_counter()
    for event in events:
        store.append_event(run.id, event)
    ours = (time.perf_counter() - started) / N_EVENTS

    conn = sqlite3.connect(tmp / "bare.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE events (run_id TEXT, seq INTEGER, data TEXT, PRIMARY KEY (run_id, seq))")
    started = time.perf_counter()
    for i, event in enumerate(events, 1):
        conn.execute("INSERT INTO events VALUES (?, ?, ?)", (run.id, i, event.to_json()))
    baseline = (time.perf_counter() - started) / N_EVENTS
    return ours, baseline


async def live_job(config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
    stamp = EventStamper(run_id or "x", start_seq)
    for _ in range(N_LIVE):
        await asyncio.sleep(0.01)
        yield stamp(Event, type="tick", sent=time.time())
    yield stamp(ReportFinished, status="completed")


def bench_live(tmp: Path) -> tuple[list[float], list[float]]:
    (tmp / "root" / "exp").mkdir(parents=True)
    settings = ServerSettings(db_path=tmp / "live.db", runs_dir=tmp / "runs", allowed_roots=[tmp / "root"])
    app = create_app(settings, live_job, config_builder=lambda request: request)
    delays: list[float] = []
    round_trips: list[float] = []
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        for _ in range(N_LIVE):
            started = time.perf_counter()
            client.get("/api/health")
            round_trips.append(time.perf_counter() - started)
        run_id = client.post("/api/runs", json={"folder": "exp"}).json()["id"]
        with client.stream("GET", f"/api/runs/{run_id}/events") as response:
            for line in response.iter_lines():
                if line.startswith("data:") and '"type":"tick"' in line:
                    sent = float(line.split('"sent":')[1].split(",")[0].rstrip("}"))
                    delays.append(time.time() - sent)
    return delays, round_trips


def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        ours, baseline = bench_append(tmp)
        print(
            f"append_event: {ours * 1e6:.0f} us/event; bare INSERT: {baseline * 1e6:.0f} us; "
            f"ratio {ours / baseline:.1f}x"
        )
        delays, round_trips = bench_live(tmp)
        median_delay, median_rtt = statistics.median(delays), statistics.median(round_trips)
        p95 = statistics.quantiles(delays, n=20)[-1]
        print(
            f"SSE live delivery: median {median_delay * 1e3:.2f} ms, p95 {p95 * 1e3:.2f} ms over {len(delays)} events; "
            f"GET round trip median {median_rtt * 1e3:.2f} ms; ratio {median_delay / median_rtt:.1f}x"
        )


if __name__ == "__main__":
    main()
