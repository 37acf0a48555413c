"""Real processes for the durable-run tests: `loopwarden serve --durable` and `loopwarden worker`
subprocesses, a fresh Postgres database per test, the demo job's folders and logs, and bounded
waits (every wait has a deadline and checks the process is still alive)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_jobs import HTTP, free_port

# Skips a module where the durable extra is missing without importing dbos: `pytest.importorskip`
# imported it (0.65 s of CPU, ~2 s of wall) in every xdist worker at collection, for modules whose
# durable code runs only in the `serve`/`worker` subprocesses.
needs_durable = pytest.mark.skipif(
    importlib.util.find_spec("dbos") is None, reason="the durable extra is not installed"
)
DEMO_JOB = "loopwarden.durable.demo:demo_job"
POSTGRES_ENV = "LOOPWARDEN_TEST_POSTGRES_URL"
WAIT_S = 120.0  # generous: a loaded 2-core machine; a wait ends as soon as its condition holds
VOLATILE = {"ts", "run_id", "latency_ms", "duration_ms", "duration_s"}


def wait_for(condition: Callable[[], Any], what: str, *, timeout: float = WAIT_S, alive: Any = ()) -> Any:
    """Poll `condition` until truthy (returned) or fail after `timeout` s, or at once if a
    process in `alive` has exited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        check_alive(alive, what)
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def check_alive(alive: Any, what: str) -> None:
    """Fail at once if a process in `alive` (one or a list) has exited."""
    for process in alive if isinstance(alive, list | tuple) else [alive]:
        if process.poll() is not None:
            pytest.fail(f"process exited ({process.returncode}) while waiting for {what}: {log_tail(process)}")


def wait_finished(base: str, run_id: str, what: str, *, alive: Any = ()) -> None:
    """Wait until the run is over, as its event stream says (the `end` frame) instead of asking
    for its status 20 times a second: each ask cost the server about 2 ms of CPU and the test
    about 1.5. After a second without a frame (or a broken connection), check `alive` and the
    deadline as `wait_for` does, then resume the stream after the last event seen."""
    deadline = time.monotonic() + WAIT_S
    last = "0"
    while True:
        try:
            with HTTP.stream(
                "GET",
                f"{base}/api/runs/{run_id}/events",
                headers={"Last-Event-ID": last},
                timeout=httpx.Timeout(30, read=1.0),
            ) as response:
                assert response.status_code == 200, response.read()
                for line in response.iter_lines():
                    field, _, value = line.partition(":")
                    if field == "id":
                        last = value.strip()
                    elif field == "event" and value.strip() == "end":
                        return
        except httpx.TransportError:  # a second of silence, or the server went away: checked below
            pass
        check_alive(alive, what)
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT_S:g} s waiting for {what}")


def postgres_url() -> str:
    """The test server's URL; skipped locally without one, a failure under CI=true."""
    url = os.environ.get(POSTGRES_ENV)
    if url:
        return url
    message = f"{POSTGRES_ENV} is not set (bash .ci/setup.d/postgres.sh starts a local Postgres and sets it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + "; CI=true: .ci/setup.d/postgres.sh must provide it")
    pytest.skip(message)


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new empty database on the test server, dropped afterwards."""
    import psycopg

    server = postgres_url()
    name = f"lw_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def demo_folder(root: Path, name: str, **spec: Any) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    spec.setdefault("calls_log", str(logs / f"{name}.calls.jsonl"))
    spec.setdefault("tools_log", str(logs / f"{name}.tools.jsonl"))
    (folder / "demo.json").write_text(json.dumps(spec))
    return folder


def read_log(path: str | Path) -> list[dict[str, Any]]:
    file = Path(path)
    return [json.loads(line) for line in file.read_text().splitlines()] if file.exists() else []


def env_for(database_url: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPWARDEN_TOKEN", "LOOPWARDEN_DATABASE_URL")}
    if database_url:
        env["LOOPWARDEN_DATABASE_URL"] = database_url
    return env | (extra or {})


@contextmanager
def serve(
    state: Path,
    allowed: Path,
    *,
    database_url: str | None = None,
    concurrency: int = 4,
    env: dict[str, str] | None = None,
    job: str = DEMO_JOB,
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`loopwarden serve --durable` with the demo job; yields (process, base URL) once healthy."""
    port = free_port()
    command = [sys.executable, "-m", "loopwarden.cli", "serve", "--durable", "--port", str(port)]
    command += ["--state-dir", str(state), "--allow-root", str(allowed)] + (["--job", job] if job else [])
    command += ["--concurrency", str(concurrency), "--queue", str(max(200, 2 * concurrency))]
    process = spawn(command, env_for(database_url, env), state / "serve.log")
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return HTTP.get(f"{base}/api/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(healthy, "the server to answer /api/health", alive=process)
        yield process, base
    finally:
        stop(process)


@contextmanager
def worker(state: Path, database_url: str, *, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`loopwarden worker`; yields once it printed that it is ready."""
    command = [sys.executable, "-m", "loopwarden.cli", "worker", "--state-dir", str(state)]
    process = spawn(command, env_for(database_url, env), state / "worker.log")
    try:
        wait_for(lambda: " ready on " in log_tail(process), "the worker's ready line", alive=process)
        yield process
    finally:
        stop(process)


def spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start a process whose stderr goes to `log` (a pipe nobody drains would fill up and
    block it); `log_tail(process)` reads it back."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:  # a restart in the same folder starts a fresh log
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=handle)
    process.log_path = log  # type: ignore[attr-defined]
    return process


def log_tail(process: subprocess.Popen[bytes], size: int = 4000) -> str:
    log: Path = process.log_path  # type: ignore[attr-defined]
    return log.read_bytes()[-size:].decode(errors="replace") if log.exists() else ""


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(30)


def submit(base: str, folder: str, **fields: Any) -> str:
    response = HTTP.post(f"{base}/api/runs", json={"folder": folder, **fields})
    assert response.status_code == 202, response.text
    run_id: str = response.json()["id"]
    return run_id


def run_status(base: str, run_id: str) -> str:
    status: str = HTTP.get(f"{base}/api/runs/{run_id}").json()["status"]
    return status


def finished(base: str, run_id: str) -> bool:
    return run_status(base, run_id) in ("completed", "degraded", "failed", "cancelled", "interrupted")


def stored_events(base: str, run_id: str) -> list[dict[str, Any]]:
    text = HTTP.get(f"{base}/api/runs/{run_id}/artifacts/events.jsonl").text
    return [json.loads(line) for line in text.splitlines()]


def comparable(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events without what differs between two identical runs (ids, clocks, durations)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return [strip(e) for e in events]
