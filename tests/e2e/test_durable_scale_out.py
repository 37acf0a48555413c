"""Scale-out on a real Postgres: two `loopwarden serve` API processes and two `loopwarden worker`
processes share one database. 100 runs submitted to either API process each finish exactly once
(one worker ran each, every model call and tool execution once), never more than the queue's
global limit at a time across both workers, and every run's events stream complete and in order
over SSE from the API process that did not take the submission, live."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from durable_kit import demo_folder, fresh_database, needs_durable, read_log, serve, stored_events, submit, worker

pytestmark = needs_durable
RUNS = 100
GLOBAL_LIMIT = 4  # durable_kit.serve passes --concurrency 4: the queue's limit across all workers


async def sse_frames(client: httpx.AsyncClient, base: str, run_id: str) -> list[dict[str, str]]:
    """The run's SSE stream, read until its `end` frame."""
    frames: list[dict[str, str]] = []
    frame: dict[str, str] = {}
    async with client.stream("GET", f"{base}/api/runs/{run_id}/events") as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line == "":
                if frame:
                    frames.append(frame)
                    if frame.get("event") == "end":
                        return frames
                frame = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(":")
                frame[key] = value.removeprefix(" ")
    return frames


async def submit_and_stream(bases: list[str], folders: list[Path]) -> tuple[list[str], list[list[dict[str, str]]]]:
    ids = [submit(bases[i % 2], folder.name) for i, folder in enumerate(folders)]
    # One client, its own connection per stream (no pool limit): a client per stream cost an SSL
    # context each (about 70 ms of CPU), 7 s for the 100 streams.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=300), limits=limits) as client:
        streams = await asyncio.gather(
            *(sse_frames(client, bases[(i + 1) % 2], run_id) for i, run_id in enumerate(ids))
        )
    return ids, list(streams)


def test_two_api_processes_and_two_workers_share_100_runs(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    folders = [demo_folder(allowed, f"run{i:03d}", turns=3, model_delay_s=0.02) for i in range(RUNS)]
    logs = allowed / "logs"
    with (
        fresh_database() as url,
        serve(tmp_path / "api1", allowed, database_url=url) as (api1, base1),
        serve(tmp_path / "api2", allowed, database_url=url) as (api2, base2),
        worker(tmp_path / "w1", url) as w1,
        worker(tmp_path / "w2", url) as w2,
    ):
        ids, streams = asyncio.run(submit_and_stream([base1, base2], folders))
        runs = {r["id"]: r for r in httpx.get(f"{base1}/api/runs", params={"limit": 500}, timeout=30).json()}
        stored = [stored_events(base1 if i % 2 else base2, run_id) for i, run_id in enumerate(ids)]
        workflows = _workflow_rows(url)
        alive = [p.poll() is None for p in (api1, api2, w1, w2)]

    assert all(alive)
    for run_id, frames, events in zip(ids, streams, stored, strict=True):
        assert runs[run_id]["status"] == "completed"
        data = [f for f in frames if f.get("event") == "run_event"]
        assert [int(f["id"]) for f in data] == list(range(1, len(data) + 1))  # complete and in order
        assert [json.loads(f["data"]) for f in data] == events  # the same events from either API process
        assert frames[-1]["event"] == "end" and json.loads(frames[-1]["data"])["last_seq"] == len(data)
        assert [e["type"] for e in events].count("report_finished") == 1
    assert Counter(status for status, _ in workflows.values()) == Counter({"SUCCESS": RUNS})
    executors = Counter(executor for _, executor in workflows.values())
    assert set(executors) == {"worker-1", "worker-2"}, executors  # both workers took runs

    worker_pids = {w1.pid, w2.pid}
    for folder in folders:
        calls = read_log(logs / f"{folder.name}.calls.jsonl")
        assert [c["turn"] for c in calls] == [1, 2, 3, 4]  # each model call exactly once
        assert len({c["pid"] for c in calls}) == 1 and calls[0]["pid"] in worker_pids  # one worker ran it
        tools = Counter((t["tool"], t["item"]) for t in read_log(logs / f"{folder.name}.tools.jsonl"))
        assert tools == Counter({("lookup", 1): 1, ("lookup", 3): 1, ("finish", 0): 1})

    assert _max_overlap([(runs[i]["started_at"], runs[i]["finished_at"]) for i in ids]) <= GLOBAL_LIMIT


def _workflow_rows(url: str) -> dict[str, tuple[str, str]]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT workflow_uuid, status, executor_id FROM dbos.workflow_status").fetchall()
    return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}


def _max_overlap(intervals: list[tuple[Any, Any]]) -> int:
    points = sorted([(float(s), 1) for s, _ in intervals] + [(float(f), -1) for _, f in intervals])
    running = peak = 0
    for _, step in points:
        running += step
        peak = max(peak, running)
    return peak
