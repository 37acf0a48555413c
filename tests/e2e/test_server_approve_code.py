"""A real report run (the offline pipeline on the example folder) started on a real uvicorn with
approve_code: it pauses at each figure call until the API decides. One figure is approved and
drawn; another is denied, never drawn, and the explorer's record says it read the denial; the
report still completes, its PDF without the denied figure. The other tests' runs make no PDF
(server_jobs.report_without_pdf): their point is the approvals."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopwarden.server.app import create_app
from loopwarden.server.settings import ServerSettings
from server_jobs import report_without_pdf, serve_in_thread

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
APPROVED, DENIED = "data_scan_1000mA", "data_scan_1500mA"
FIGURE_CALLS = 3  # one per table of examples/field-scan
FINAL = {"completed", "degraded", "failed", "cancelled", "interrupted"}


def _settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(
        db_path=tmp_path / "state" / "runs.db", runs_dir=tmp_path / "state" / "runs", allowed_roots=[EXAMPLES]
    )


def _poll(client: httpx.Client, run_id: str, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The run once `until` is true of it (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + 300
    while True:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        if until(run):
            return run
        assert time.monotonic() < deadline, f"run never got there: {run['status']} {run['approvals']}"
        time.sleep(0.1)


def _pending(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in run["approvals"] if a["status"] == "pending"]


def _final(run: dict[str, Any]) -> bool:
    return run["status"] in FINAL


def _decide_every_figure(client: httpx.Client, run_id: str, choose: Callable[[str], str]) -> dict[str, str]:
    """Decide each figure call as it comes (choose: figure file name -> approve|deny), until all are."""
    decided: dict[str, str] = {}
    while len(decided) < FIGURE_CALLS:
        run = _poll(client, run_id, lambda r: bool(_pending(r)))
        for approval in _pending(run):
            assert approval["tool"] == "make_figure" and "load(" in approval["arguments"]["code"]
            decision = choose(approval["arguments"]["filename"])
            note = "not this one" if decision == "deny" else ""
            answer = client.post(
                f"/api/runs/{run_id}/approvals/{approval['call_id']}",
                json={"decision": decision, "note": note, "by": "api"},
            )
            assert answer.status_code == 200, answer.text
            decided[approval["arguments"]["filename"]] = decision
    return decided


def _events(client: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    log = client.get(f"/api/runs/{run_id}/artifacts/events.jsonl").text
    return [json.loads(line) for line in log.splitlines() if line]


def test_api_approves_one_figure_and_denies_another_in_a_real_run(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path))  # the real report pipeline, offline, with its PDF
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        started = client.post("/api/runs", json={"folder": "field-scan", "approve_code": True})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        paused = _poll(client, run_id, lambda r: r["status"] == "paused")  # the run waits for us
        assert _pending(paused)
        decided = _decide_every_figure(client, run_id, lambda name: "approve" if name == APPROVED else "deny")
        assert decided[APPROVED] == "approve" and decided[DENIED] == "deny"

        run = _poll(client, run_id, _final)
        assert run["status"] in ("completed", "degraded"), run["message"]
        assert run["params"]["approve_code"] is True
        assert {a["status"] for a in run["approvals"]} == {"approved", "denied"}

        events = _events(client, run_id)
        by_call = {e["call_id"]: e for e in events if e["type"] == "approval_decided"}
        assert {e["approved"] for e in by_call.values()} == {True, False}
        assert all(e["by"] == "api" for e in by_call.values())
        results = {e["call_id"]: e for e in events if e["type"] == "tool_call_finished" and e["call_id"] in by_call}
        assert {c for c, e in results.items() if e["error_type"] == "denied" and not e["executed"]} == {
            c for c, e in by_call.items() if not e["approved"]
        }

        names = {a["name"] for a in client.get(f"/api/runs/{run_id}/artifacts").json()}
        assert f"figures/{APPROVED}.png" in names and f"figures/{DENIED}.png" not in names
        assert ("report.pdf" in names) == (shutil.which("xelatex") is not None)  # compiles without the denied one
        assert client.get(f"/api/runs/{run_id}/artifacts/figures/{DENIED}.png").status_code == 404
        record = client.get(f"/api/runs/{run_id}/artifacts/exploration.json").json()
        assert f"make_figure {DENIED}" in record["methodology_notes"]  # the explorer read the denial
        assert [f["path"] for f in record["figures"]] == [f"figures/{APPROVED}.png"]


def test_the_form_field_starts_a_run_that_pauses_at_the_first_figure(tmp_path: Path) -> None:
    app = create_app(_settings(tmp_path), report_without_pdf)
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        started = client.post("/api/runs", data={"folder": "field-scan", "approve_code": "on"})
        assert started.status_code == 202, started.text
        run_id = started.json()["id"]
        run = _poll(client, run_id, lambda r: r["status"] == "paused")
        assert _pending(run) and run["params"]["approve_code"] is True
        assert client.post(f"/api/runs/{run_id}/cancel").status_code == 202
        assert _poll(client, run_id, _final)["status"] == "cancelled"
        plain = client.post("/api/runs", data={"folder": "field-scan"}).json()["id"]
        finished = _poll(client, plain, _final)
        assert finished["approvals"] == [] and finished["params"]["approve_code"] is False


def test_two_paused_runs_with_the_same_call_ids_are_decided_apart(tmp_path: Path) -> None:
    """The offline explorer numbers its calls the same way in every run: a decision on one run's
    call must reach that run's gate only."""
    app = create_app(_settings(tmp_path), report_without_pdf)
    with serve_in_thread(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        ids = [client.post("/api/runs", json={"folder": "field-scan", "approve_code": True}).json()["id"] for _ in "ab"]
        first = [_poll(client, run_id, lambda r: bool(_pending(r)))["approvals"][0] for run_id in ids]
        assert first[0]["call_id"] == first[1]["call_id"]  # the same ids in both runs
        _decide_every_figure(client, ids[0], lambda _: "deny")
        _decide_every_figure(client, ids[1], lambda _: "approve")
        for run_id, approved in zip(ids, (False, True), strict=True):
            assert _poll(client, run_id, _final)["status"] in ("completed", "degraded")
            figures = [
                e for e in _events(client, run_id) if e["type"] == "tool_call_finished" and e["tool"] == "make_figure"
            ]
            assert len(figures) == FIGURE_CALLS
            # Denied calls never ran; approved ones ran (whether each drew is the sandbox's business).
            assert all(e["executed"] is approved for e in figures)
            assert all((e["error_type"] == "denied") is not approved for e in figures)
