"""50 concurrent submissions to a real uvicorn with a concurrency limit of 4: at most 4 run at
once, the rest are queued up to the queue limit or answered 429 with Retry-After, every accepted
run finishes with a gapless event sequence, and SQLite never reports "database is locked"."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopwarden.events import Event
from loopwarden.server.app import create_app
from loopwarden.server.settings import ServerSettings
from server_jobs import serve_in_thread, ticking_job


class CountingJob:
    def __init__(self) -> None:
        self.running = 0
        self.peak = 0

    async def __call__(self, config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            async for event in ticking_job(config, run_id=run_id, start_seq=start_seq):
                yield event
        finally:
            self.running -= 1


async def test_fifty_concurrent_submissions_with_four_slots(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    allowed = tmp_path / "allowed"
    (allowed / "exp").mkdir(parents=True)
    (allowed / "exp" / "job.json").write_text(json.dumps({"events": 30, "delay": 0.02}))
    settings = ServerSettings(
        db_path=tmp_path / "state" / "runs.db",
        runs_dir=tmp_path / "state" / "runs",
        allowed_roots=[allowed],
        max_concurrency=4,
        max_queue=20,
        retry_after_s=5,
    )
    job = CountingJob()
    caplog.set_level(logging.WARNING)
    with serve_in_thread(create_app(settings, job)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            responses = await asyncio.gather(*(client.post("/api/runs", json={"folder": "exp"}) for _ in range(50)))
            codes = [r.status_code for r in responses]
            accepted = [r.json()["id"] for r in responses if r.status_code == 202]
            refused = [r for r in responses if r.status_code == 429]
            assert sorted(set(codes)) == [202, 429] and len(accepted) + len(refused) == 50
            assert 4 <= len(accepted) <= 24
            assert all(r.headers["retry-after"] == "5" for r in refused)
            async with asyncio.timeout(90):
                while True:
                    runs = (await client.get("/api/runs", params={"limit": 100})).json()
                    if all(r["status"] not in ("queued", "running") for r in runs):
                        break
                    await asyncio.sleep(0.1)
            assert len(runs) == len(accepted)
            assert {r["status"] for r in runs} == {"completed"}
            for run_id in accepted:
                text = (await client.get(f"/api/runs/{run_id}/artifacts/events.jsonl")).text
                seqs = [json.loads(line)["seq"] for line in text.splitlines()]
                assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 32
    assert job.peak == 4
    assert "database is locked" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
