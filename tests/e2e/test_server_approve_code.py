"""A real report run (the offline pipeline on the example folder) started on a real uvicorn with
approve_code: it pauses at each figure call until the API decides. One figure is approved and
drawn; another is denied, never drawn, and the explorer's record says it read the denial; the
report still completes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopwarden.server.app import create_app
from loopwarden.server.settings import ServerSettings
from server_jobs import serve_in_thread

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
APPROVED, DENIED = "data_scan_1000mA", "data_scan_1500mA"
FINAL = {"completed", "degraded", "failed", "cancelled", "interrupted"}


def _settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(
        db_path=tmp_path / "state" / "runs.db", runs_dir=tmp_path / "state" / "runs", allowed_roots=[EXAMPLES]
    )


def _poll(client: httpx.Client, run_id: str, until: str, limit_s: float = 300) -> dict[str, Any]:
    """The run once `until` is true of it (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while True:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        if (until == "pending" and any(a["status"] == "pending" for a in run["approvals"])) or (
            until == "final" and run["status"] in FINAL
        ):
            return run
        assert time.monotonic() < deadline, f"run never reached {until}: {run['status']}"
        time.sleep(0.1)


def test_api_approves_one_figure_and_denies_another_in_a_real_run(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path))  # the real report pipeline, offline
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        started = client.post("/api/runs", json={"folder": "field-scan", "approve_code": True})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        decided: dict[str, str] = {}
        while True:
            run = _poll(client, run_id, "pending")
            assert run["status"] == "paused"  # the run waits for us
            for approval in [a for a in run["approvals"] if a["status"] == "pending"]:
                assert approval["tool"] == "make_figure" and "load(" in approval["arguments"]["code"]
                name = approval["arguments"]["filename"]
                decision = "approve" if name == APPROVED else "deny"
                answer = client.post(
                    f"/api/runs/{run_id}/approvals/{approval['call_id']}",
                    json={"decision": decision, "note": "not this one" if decision == "deny" else "", "by": "api"},
                )
                assert answer.status_code == 200, answer.text
                decided[name] = decision
            if APPROVED in decided and DENIED in decided:
                break
        run = _poll(client, run_id, "final")
        assert run["status"] in ("completed", "degraded"), run["message"]
        assert run["params"]["approve_code"] is True
        assert {a["status"] for a in run["approvals"]} == {"approved", "denied"}

        log = client.get(f"/api/runs/{run_id}/artifacts/events.jsonl").text
        events = [json.loads(line) for line in log.splitlines() if line]
        by_call = {e["call_id"]: e for e in events if e["type"] == "approval_decided"}
        assert {e["approved"] for e in by_call.values()} == {True, False}
        assert all(e["by"] == "api" for e in by_call.values())
        results = {e["call_id"]: e for e in events if e["type"] == "tool_result" and e["call_id"] in by_call}
        assert {c for c, e in results.items() if e["error_type"] == "denied" and not e["executed"]} == {
            c for c, e in by_call.items() if not e["approved"]
        }

        names = {a["name"] for a in client.get(f"/api/runs/{run_id}/artifacts").json()}
        assert f"figures/{APPROVED}.png" in names and f"figures/{DENIED}.png" not in names
        assert client.get(f"/api/runs/{run_id}/artifacts/figures/{DENIED}.png").status_code == 404
        record = client.get(f"/api/runs/{run_id}/artifacts/exploration.json").json()
        assert f"make_figure {DENIED}" in record["methodology_notes"]  # the explorer read the denial
        assert [f["path"] for f in record["figures"]] == [f"figures/{APPROVED}.png"]


def test_the_form_field_starts_a_run_that_pauses_at_the_first_figure(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path))
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        started = client.post("/api/runs", data={"folder": "field-scan", "approve_code": "on"})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        run = _poll(client, run_id, "pending")
        assert run["status"] == "paused" and run["params"]["approve_code"] is True
        assert client.post(f"/api/runs/{run_id}/cancel").status_code == 202
        assert _poll(client, run_id, "final")["status"] == "cancelled"
        plain = client.post("/api/runs", data={"folder": "field-scan"}).json()["id"]
        finished = _poll(client, plain, "final")
        assert finished["approvals"] == [] and finished["params"]["approve_code"] is False
