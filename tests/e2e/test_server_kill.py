"""SIGKILL a real `loopwarden serve` process mid-run, start it again on the same state folder:
the run is `interrupted` and every event committed before the kill is still there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from server_jobs import HTTP, free_port, parse_sse  # noqa: E402

LOADED = 60.0
"""Seconds an HTTP call to the server may take: on a machine busy with other work a live server
can be slow to answer (httpx's default of 5 s failed once under load); a dead one fails at once."""


@contextmanager
def serve_process(state: Path, allowed: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("LOOPWARDEN_TOKEN", None)
    command = [sys.executable, "-m", "loopwarden.cli", "serve", "--port", str(port), "--state-dir", str(state)]
    command += ["--allow-root", str(allowed), "--job", "server_jobs:ticking_job"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if HTTP.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        yield process, base
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def stored_events(base: str, run_id: str) -> list[dict[str, object]]:
    response = httpx.get(f"{base}/api/runs/{run_id}/artifacts/events.jsonl", timeout=LOADED)
    return [json.loads(line) for line in response.text.splitlines()]


def test_sigkill_mid_run_leaves_an_interrupted_run_with_its_events(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    (allowed / "exp").mkdir(parents=True)
    (allowed / "exp" / "job.json").write_text(json.dumps({"events": 2000, "delay": 0.005}))
    state = tmp_path / "state"

    with serve_process(state, allowed) as (process, base):
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "exp"}, timeout=LOADED).json()["id"]
        deadline = time.monotonic() + 30
        while HTTP.get(f"{base}/api/runs/{run_id}", timeout=LOADED).json()["last_seq"] < 60:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        before = stored_events(base, run_id)
        # A second server on the same state folder refuses to start (it would interrupt live runs).
        second = subprocess.run(
            [sys.executable, "-m", "loopwarden.cli", "serve", "--port", str(free_port()), "--state-dir", str(state)],
            capture_output=True,
            timeout=60,
        )
        assert second.returncode == 2 and b"another loopwarden server" in second.stderr
        assert httpx.get(f"{base}/api/runs/{run_id}", timeout=LOADED).json()["status"] == "running"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    assert len(before) >= 60

    with serve_process(state, allowed) as (_, base):
        run = httpx.get(f"{base}/api/runs/{run_id}", timeout=LOADED).json()
        assert run["status"] == "interrupted" and run["finished_at"] is not None
        after = stored_events(base, run_id)
        assert after[: len(before)] == before  # every event seen before the kill, unchanged
        assert [e["seq"] for e in after] == list(range(1, len(after) + 1))
        assert after[-1]["type"] == "run_interrupted"
        assert not any(e["type"] == "report_finished" for e in after)  # it really died mid-run
        frames = parse_sse(httpx.get(f"{base}/api/runs/{run_id}/events", timeout=LOADED).text)
        assert frames[-1]["event"] == "end" and json.loads(frames[-1]["data"])["status"] == "interrupted"
        assert len([f for f in frames if "id" in f]) == len(after)
        # The restarted server takes new runs.
        assert httpx.post(f"{base}/api/runs", json={"folder": "exp"}, timeout=LOADED).status_code == 202
