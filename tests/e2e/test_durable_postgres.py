"""Durable runs on a real Postgres with real processes: `loopwarden serve` (API only) and
`loopwarden worker` processes sharing runs through the database.

- A worker SIGKILLed mid-run: a new worker finishes the run from its recorded steps, with the
  same events as an uninterrupted run; the model is asked nothing twice and no tool runs twice,
  except `slow_write`, the step running at the kill.
- A run paused for approval survives a restart of every process and completes after the decision.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from durable_kit import (
    HTTP,
    comparable,
    demo_folder,
    fresh_database,
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


def test_a_killed_worker_is_replaced_and_the_run_repeats_nothing(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    killed = demo_folder(allowed, "killed", turns=6, hold_turn=3, release_file=str(tmp_path / "release"))
    calm = demo_folder(allowed, "calm", turns=6, hold_turn=3)
    logs = allowed / "logs"
    with fresh_database() as url, serve(tmp_path / "api", allowed, database_url=url) as (api, base):
        with worker(tmp_path / "w1", url) as first:
            run_id = submit(base, killed.name)
            wait_for(
                lambda: any(t["tool"] == "slow_write" for t in read_log(logs / "killed.tools.jsonl")),
                "slow_write to start on the worker",
                alive=[api, first],
            )
            os.kill(first.pid, signal.SIGKILL)
            first.wait(30)
            first_pid = first.pid
        assert run_status(base, run_id) == "running"  # the API process knows nothing went wrong
        (tmp_path / "release").touch()
        with worker(tmp_path / "w2", url) as second:
            wait_finished(base, run_id, "the run to finish on the new worker", alive=[api, second])
            calm_id = submit(base, calm.name)
            wait_finished(base, calm_id, "the uninterrupted run", alive=[api, second])
        resumed, uninterrupted = stored_events(base, run_id), stored_events(base, calm_id)

    assert resumed[-1]["type"] == "report_finished" and resumed[-1]["status"] == "completed"
    assert [e["seq"] for e in resumed] == list(range(1, len(resumed) + 1))
    assert comparable(resumed)[1:] == comparable(uninterrupted)[1:]
    calls = read_log(logs / "killed.calls.jsonl")
    assert [c["turn"] for c in calls] == list(range(1, 8))  # every model call exactly once
    assert {c["pid"] for c in calls[:3]} == {first_pid} and first_pid not in {c["pid"] for c in calls[3:]}
    extra = executions(logs / "killed.tools.jsonl") - executions(logs / "calm.tools.jsonl")
    assert extra == Counter({("slow_write", 3, "started"): 1})
    assert not executions(logs / "calm.tools.jsonl") - executions(logs / "killed.tools.jsonl")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_paused_approval_survives_a_restart_of_everything(tmp_path: Path, backend: str) -> None:
    allowed = tmp_path / "allowed"
    folder = demo_folder(allowed, "approve", turns=4, approval_turn=2)
    logs = allowed / "logs"

    def processes(url: str | None) -> tuple[Any, Any]:
        """On SQLite the server runs the runs; on Postgres a worker does."""
        return serve(tmp_path / "api", allowed, database_url=url), worker(tmp_path / "w", url) if url else nullcontext()

    def paused(base: str, run_id: str) -> bool:
        approvals = HTTP.get(f"{base}/api/runs/{run_id}/approvals").json()
        return run_status(base, run_id) == "paused" and [a["status"] for a in approvals] == ["pending"]

    with fresh_database() if backend == "postgres" else nullcontext() as url:
        api_cm, worker_cm = processes(url)
        with api_cm as (api, base), worker_cm as work:
            run_id = submit(base, folder.name)
            wait_for(lambda: paused(base, run_id), "the run to pause for approval", alive=[p for p in (api, work) if p])
            for process in (api, work):
                if process is not None:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait(30)
        assert not any(t["tool"] == "approved_write" for t in read_log(logs / "approve.tools.jsonl"))

        api_cm, worker_cm = processes(url)
        with api_cm as (api, base), worker_cm as work:
            assert paused(base, run_id)
            call_id = HTTP.get(f"{base}/api/runs/{run_id}/approvals").json()[0]["call_id"]
            decided = HTTP.post(
                f"{base}/api/runs/{run_id}/approvals/{call_id}", json={"decision": "approve", "by": "ann"}
            )
            assert decided.status_code == 200 and decided.json()["status"] == "approved"
            again = HTTP.post(f"{base}/api/runs/{run_id}/approvals/{call_id}", json={"decision": "deny"})
            assert again.status_code == 409  # the first decision stands
            wait_finished(base, run_id, "the approved run to finish", alive=[p for p in (api, work) if p])
            events = stored_events(base, run_id)

    assert events[-1]["type"] == "report_finished" and events[-1]["status"] == "completed"
    types = [e["type"] for e in events]
    assert types.count("approval_required") == 1 and types.count("approval_decided") == 1
    decided_event = next(e for e in events if e["type"] == "approval_decided")
    assert decided_event["approved"] is True and decided_event["by"] == "ann"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert executions(logs / "approve.tools.jsonl")[("approved_write", 2, "done")] == 1
    calls = read_log(logs / "approve.calls.jsonl")
    assert [c["turn"] for c in calls] == list(range(1, 6))  # nothing asked again after the restart
