"""Dead-worker takeover on a real Postgres: two `loopwarden worker` processes share the queue; the
one running a run is lost while the other keeps running, either SIGKILLed or cut off from the
database (its slot session terminated by the server: it must stop itself, with one line, since
its runs are about to be handed on). The survivor notices (the slot lock is free, engine.py) and
finishes the run from its recorded steps: the same events as an uninterrupted run, the model
asked nothing twice, no tool executed twice except `slow_write`, the step running at the loss,
whose re-run carries the same idempotency key."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable_kit import (
    WAIT_S,
    comparable,
    demo_folder,
    fresh_database,
    log_tail,
    needs_durable,
    read_log,
    run_status,
    serve,
    stored_events,
    submit,
    wait_finished,
    wait_for,
    worker,
)

pytestmark = needs_durable


def executions(log: Path) -> Counter[tuple[str, int, str]]:
    return Counter((t["tool"], t["item"], t["phase"]) for t in read_log(log))


def terminate_slot_session(url: str, executor_id: str) -> None:
    """End the worker's slot session from the server side, as a network cut would."""
    import psycopg

    from loopwarden.durable.engine import WORKER_SLOT_LOCK

    key = WORKER_SLOT_LOCK + int(executor_id.removeprefix("worker-"))
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            # Only this test's database: another test's workers hold the same keys in theirs.
            "SELECT pg_terminate_backend(pid) FROM pg_locks"
            " WHERE locktype = 'advisory' AND granted AND classid = %s AND objid = %s"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (key >> 32, key & 0xFFFFFFFF),
        ).fetchall()
    assert rows == [(True,)]


def executor_of(process: object) -> str:
    line = next(line for line in log_tail(process).splitlines() if " ready on " in line)  # type: ignore[arg-type]
    return line.split("worker ", 1)[1].split()[0]


@pytest.fixture(scope="module")
def shared_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any, str, Path]]:
    """(database URL, API process, its base URL, allowed root): one database and one API process for
    both kinds of loss, a serve start and a schema migration less (about 2 s of CPU). Each test
    starts its own two workers (stopped at its end, with every run it submitted finished) and runs
    its own folders, under a root of its own inside the allowed one."""
    root = tmp_path_factory.mktemp("takeover")
    allowed = root / "allowed"
    allowed.mkdir()
    with fresh_database() as url, serve(root / "api", allowed, database_url=url) as (api, base):
        yield url, api, base, allowed


@pytest.mark.parametrize("loss", ["sigkill", "session_cut"])
def test_the_surviving_worker_takes_over_a_lost_workers_run(
    tmp_path: Path, loss: str, shared_api: tuple[str, Any, str, Path]
) -> None:
    url, api, base, root = shared_api
    allowed = root / loss
    killed = demo_folder(allowed, "killed", turns=6, hold_turn=3, release_file=str(tmp_path / "release"))
    calm = demo_folder(allowed, "calm", turns=6, hold_turn=3)
    logs = allowed / "logs"
    with worker(tmp_path / "w1", url) as one, worker(tmp_path / "w2", url) as two:
        run_id = submit(base, f"{loss}/{killed.name}")
        started = wait_for(
            lambda: [t for t in read_log(logs / "killed.tools.jsonl") if t["tool"] == "slow_write"],
            "slow_write to start on a worker",
            alive=[api, one, two],
        )
        victim, survivor = (one, two) if started[0]["pid"] == one.pid else (two, one)
        assert started[0]["pid"] == victim.pid
        if loss == "sigkill":
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(30)
        else:
            terminate_slot_session(url, executor_of(victim))
            assert victim.wait(WAIT_S) == 3
            said = log_tail(victim).strip().splitlines()
            assert said[-1].startswith("error: worker-") and "lost its database session" in said[-1]
            assert "Traceback" not in log_tail(victim)
        assert run_status(base, run_id) == "running"
        (tmp_path / "release").touch()
        wait_finished(base, run_id, "the survivor to finish the run", alive=[api, survivor])
        calm_id = submit(base, f"{loss}/{calm.name}")
        wait_finished(base, calm_id, "the uninterrupted run", alive=[api, survivor])
        resumed, uninterrupted = stored_events(base, run_id), stored_events(base, calm_id)

    assert resumed[-1]["type"] == "report_finished" and resumed[-1]["status"] == "completed"
    assert [e["seq"] for e in resumed] == list(range(1, len(resumed) + 1))
    assert comparable(resumed)[1:] == comparable(uninterrupted)[1:]
    calls = read_log(logs / "killed.calls.jsonl")
    assert [c["turn"] for c in calls] == list(range(1, 8))  # every model call exactly once
    assert {c["pid"] for c in calls[:3]} == {victim.pid} and {c["pid"] for c in calls[3:]} == {survivor.pid}
    extra = executions(logs / "killed.tools.jsonl") - executions(logs / "calm.tools.jsonl")
    assert extra == Counter({("slow_write", 3, "started"): 1})
    assert not executions(logs / "calm.tools.jsonl") - executions(logs / "killed.tools.jsonl")
    writes = [t for t in read_log(logs / "killed.tools.jsonl") if t["tool"] == "slow_write"]
    assert {t["pid"] for t in writes} == {victim.pid, survivor.pid} and len({t["key"] for t in writes}) == 1
