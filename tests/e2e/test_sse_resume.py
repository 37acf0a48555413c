"""SSE resume against a real uvicorn on 127.0.0.1: the connection is dropped at random byte
positions 50 times while a run is producing events; every event must arrive exactly once, in
order, and the stream must end with the terminal event."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopwarden.server.app import create_app
from loopwarden.server.settings import ServerSettings
from server_jobs import GatedJob, serve_in_thread, ticking_job

DROPS = 50


def settings_for(tmp_path: Path, **overrides: Any) -> ServerSettings:
    data = tmp_path / "allowed" / "exp"
    data.mkdir(parents=True)
    (data / "job.json").write_text(json.dumps({"events": 400, "delay": 0.005, "text": "line1\nid: 7\n\ndata: x"}))
    base: dict[str, Any] = {
        "db_path": tmp_path / "state" / "runs.db",
        "runs_dir": tmp_path / "state" / "runs",
        "allowed_roots": [tmp_path / "allowed"],
    }
    return ServerSettings(**{**base, **overrides})


def complete_frames(buffer: str) -> tuple[list[dict[str, str]], str]:
    """Split off the complete frames (ended by a blank line); the rest is an unfinished frame."""
    frames = []
    normalized = buffer.replace("\r\n", "\n")
    *complete, rest = normalized.split("\n\n")
    for block in complete:
        frame: dict[str, str] = {}
        data = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            else:
                frame[field] = value
        if data:
            frame["data"] = "\n".join(data)
            frames.append(frame)
    return frames, rest


def read_with_drops(base: str, run_id: str, rng: random.Random, drops: int) -> tuple[list[dict[str, Any]], int, int]:
    """A client that keeps Last-Event-ID and reconnects after each drop. Returns the events it
    dispatched, the drops made, and how many drops happened while the run was still live."""
    received: list[dict[str, Any]] = []
    last = 0
    made = live_drops = 0
    ended = False
    with httpx.Client(base_url=base, timeout=30) as client:
        while not ended:
            cut = rng.randint(1, 1500) if made < drops else None
            headers = {"Last-Event-ID": str(last)} if last else {}
            seen_bytes = 0
            buffer = ""
            with client.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as response:
                assert response.status_code == 200, response.read()
                for chunk in response.iter_text():
                    if cut is not None and seen_bytes + len(chunk) >= cut:
                        buffer += chunk[: cut - seen_bytes]
                    else:
                        buffer += chunk
                    seen_bytes += len(chunk)
                    frames, buffer = complete_frames(buffer)
                    for frame in frames:
                        if frame.get("event") == "end":
                            ended = True
                            break
                        seq = int(frame["id"])
                        assert seq > last, f"duplicate or out of order: {seq} after {last}"
                        received.append(json.loads(frame["data"]))
                        last = seq
                    if ended:
                        break
                    if cut is not None and seen_bytes >= cut:
                        made += 1
                        if client.get(f"/api/runs/{run_id}").json()["status"] == "running":
                            live_drops += 1
                        break  # leaving the block closes the connection mid-stream
    return received, made, live_drops


@pytest.mark.parametrize("seed", [1, 2])
def test_fifty_random_drops_lose_and_duplicate_nothing(tmp_path: Path, seed: int) -> None:
    app = create_app(settings_for(tmp_path), ticking_job)
    with serve_in_thread(app) as base:
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "exp"}).json()["id"]
        received, made, live_drops = read_with_drops(base, run_id, random.Random(seed), DROPS)
        run = httpx.get(f"{base}/api/runs/{run_id}").json()
    assert made == DROPS
    assert live_drops >= 10, "most drops should hit the live part of the run"
    assert run["status"] == "completed"
    assert [e["seq"] for e in received] == list(range(1, run["last_seq"] + 1))
    assert received[-1]["type"] == "report_finished"
    milestones = [e for e in received if e["type"] == "milestone"]
    assert [m["detail"]["i"] for m in milestones] == list(range(1, 401))
    assert all(m["detail"]["text"] == "line1\nid: 7\n\ndata: x" for m in milestones)


def test_heartbeat_comments_keep_an_idle_stream_alive(tmp_path: Path) -> None:
    job = GatedJob()
    app = create_app(settings_for(tmp_path, heartbeat_s=0.2), job)
    with serve_in_thread(app) as base:
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "exp"}).json()["id"]
        pings = 0
        started = time.monotonic()
        with httpx.stream("GET", f"{base}/api/runs/{run_id}/events", timeout=10) as response:
            for line in response.iter_lines():
                pings += line.startswith(":")
                if pings >= 3 or time.monotonic() - started > 5:
                    break
        httpx.post(f"{base}/api/runs/{run_id}/cancel")
    assert pings >= 3
