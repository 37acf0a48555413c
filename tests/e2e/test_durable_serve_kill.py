"""SIGKILL a real `loopwarden serve --durable` (embedded SQLite) in the middle of a run and start
it again: the run resumes from its recorded steps and ends with the same events as a run nobody
interrupted; the model is never asked the same thing twice and no tool runs twice, except the
`slow_write` that was running at the kill."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

from durable_kit import (
    comparable,
    demo_folder,
    finished,
    needs_durable,
    read_log,
    serve,
    stored_events,
    submit,
    wait_finished,
    wait_for,
)

pytestmark = needs_durable


def test_a_killed_server_resumes_the_run_without_repeating_steps(tmp_path: Path) -> None:
    allowed, state = tmp_path / "allowed", tmp_path / "state"
    killed = demo_folder(allowed, "killed", turns=6, hold_turn=3, release_file=str(tmp_path / "release"))
    calm = demo_folder(allowed, "calm", turns=6, hold_turn=3)
    calls, tools = tmp_path / "allowed/logs/killed.calls.jsonl", tmp_path / "allowed/logs/killed.tools.jsonl"

    with serve(state, allowed) as (process, base):
        run_id = submit(base, killed.name)
        wait_for(lambda: any(t["tool"] == "slow_write" for t in read_log(tools)), "slow_write to start", alive=process)
        first_pid = process.pid
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    assert not finished_in_log(tools)
    (tmp_path / "release").touch()

    with serve(state, allowed) as (process, base):
        wait_finished(base, run_id, "the resumed run to finish", alive=process)
        resumed = stored_events(base, run_id)
        calm_id = submit(base, calm.name)
        wait_finished(base, calm_id, "the uninterrupted run to finish", alive=process)
        uninterrupted = stored_events(base, calm_id)

    assert resumed[-1]["type"] == "report_finished" and resumed[-1]["status"] == "completed"
    assert [e["seq"] for e in resumed] == list(range(1, len(resumed) + 1))
    assert comparable(resumed)[1:] == comparable(uninterrupted)[1:]  # [0] is run_queued: its folder differs
    verdicts = [e["action"] for e in resumed if e["type"] == "guard_verdict"]
    assert verdicts.count("cached") == 1 and verdicts.count("nudged") == 1  # ladder counts survived the kill

    model_calls = read_log(calls)
    assert Counter(c["request"] for c in model_calls).most_common(1)[0][1] == 1, "a model call was repeated"
    assert [c["turn"] for c in model_calls] == list(range(1, 8))
    assert {c["pid"] for c in model_calls if c["turn"] <= 3} == {first_pid}
    assert first_pid not in {c["pid"] for c in model_calls if c["turn"] > 3}

    def executions(log: Path) -> Counter[tuple[str, int, str]]:
        return Counter((t["tool"], t["item"], t["phase"]) for t in read_log(log))

    # Exactly the uninterrupted run's tool executions, plus the start of the step running at the kill.
    extra = executions(tools) - executions(tmp_path / "allowed/logs/calm.tools.jsonl")
    assert extra == Counter({("slow_write", 3, "started"): 1})
    assert not executions(tmp_path / "allowed/logs/calm.tools.jsonl") - executions(tools)
    keys = {t["key"] for t in read_log(tools) if t["tool"] == "slow_write"}
    assert len(keys) == 1  # and with the same idempotency key both times


def finished_in_log(tools: Path) -> bool:
    return any(t["tool"] == "finish" for t in read_log(tools))


def test_a_cancelled_durable_run_ends_and_its_workflow_stops(tmp_path: Path) -> None:
    import sqlite3

    import httpx

    allowed, state = tmp_path / "allowed", tmp_path / "state"
    folder = demo_folder(allowed, "held", turns=6, hold_turn=2, release_file=str(tmp_path / "release"))
    tools = allowed / "logs" / "held.tools.jsonl"

    def workflow_status(run_id: str) -> str | None:
        with sqlite3.connect(state / "dbos.sqlite") as conn:
            row = conn.execute("SELECT status FROM workflow_status WHERE workflow_uuid = ?", (run_id,)).fetchone()
        return None if row is None else str(row[0])

    with serve(state, allowed) as (process, base):
        run_id = submit(base, folder.name)
        wait_for(lambda: any(t["tool"] == "slow_write" for t in read_log(tools)), "slow_write to start", alive=process)
        assert httpx.post(f"{base}/api/runs/{run_id}/cancel", timeout=30).status_code == 202
        (tmp_path / "release").touch()
        wait_for(lambda: workflow_status(run_id) == "CANCELLED", "the workflow to be cancelled", alive=process)
        events = stored_events(base, run_id)
        assert finished(base, run_id) and events[-1]["type"] == "report_finished"
        assert events[-1]["status"] == "cancelled" and events[-1]["stop_reasons"] == ["cancelled"]
        assert httpx.post(f"{base}/api/runs/{run_id}/cancel", timeout=30).status_code == 409
    assert not any(t["tool"] == "finish" for t in read_log(tools))
