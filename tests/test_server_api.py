from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from loopwarden.server.app import create_app
from loopwarden.server.jobs import Job, RunRequest
from loopwarden.server.settings import InsecureBinding, ServerSettings, check_binding
from loopwarden.trace.store import RunStore
from server_jobs import GatedJob, approval_job, crashing_job, parse_sse, ticking_job, unfinished_job


def passthrough(request: RunRequest) -> RunRequest:
    return request


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "allowed" / "exp1"
    data.mkdir(parents=True)
    (data / "data.csv").write_text("t,v\n0,1\n")
    return tmp_path / "allowed"


def make_settings(tmp_path: Path, root: Path, **overrides: Any) -> ServerSettings:
    base: dict[str, Any] = {
        "db_path": tmp_path / "state" / "runs.db",
        "runs_dir": tmp_path / "state" / "runs",
        "allowed_roots": [root],
    }
    return ServerSettings(**{**base, **overrides})


AppFactory = Callable[..., FastAPI]


@pytest.fixture
def make_app(tmp_path: Path, root: Path) -> AppFactory:
    def factory(job: Job = ticking_job, **overrides: Any) -> FastAPI:
        return create_app(make_settings(tmp_path, root, **overrides), job, config_builder=passthrough)

    return factory


@pytest.fixture
async def client_for() -> AsyncIterator[Callable[[FastAPI], httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def open_client(app: FastAPI) -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        await client.aclose()


async def wait_status(
    client: httpx.AsyncClient, run_id: str, statuses: set[str], timeout: float = 10
) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            run = (await client.get(f"/api/runs/{run_id}")).json()
            if run["status"] in statuses:
                return run
            await asyncio.sleep(0.01)


async def test_folder_run_completes_with_progress_events_and_artifacts(make_app: AppFactory, client_for: Any) -> None:
    client = client_for(make_app())
    response = await client.post("/api/runs", json={"folder": "exp1", "template": "lab", "lang": "en"})
    assert response.status_code == 202, response.text
    run_id = response.json()["id"]
    assert len(run_id) == 32 and int(run_id, 16) >= 0
    run = await wait_status(client, run_id, {"completed", "failed"})
    assert run["status"] == "completed"
    assert run["progress"]["total"] == 5 and run["progress"]["done"] == 5
    assert run["params"]["template"] == "lab" and run["params"]["source"].endswith("exp1")
    assert run["totals"]["model_calls"] == 5
    names = {a["name"] for a in run["artifacts"]}
    assert {"report.md", "figures/plot.png", "events.jsonl"} <= names

    md = await client.get(f"/api/runs/{run_id}/artifacts/report.md")
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/plain") and "# Report" in md.text
    html = await client.get(f"/api/runs/{run_id}/artifacts/page.html")
    assert html.headers["content-type"] == "application/octet-stream"  # never rendered as HTML
    assert html.headers["content-disposition"].startswith("attachment")
    jsonl = await client.get(f"/api/runs/{run_id}/artifacts/events.jsonl")
    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["type"] == "run_queued" and lines[-1]["type"] == "report_finished"
    assert (await client.get(f"/api/runs/{run_id}/artifacts/../../runs.db")).status_code == 404
    listed = (await client.get("/api/runs")).json()
    assert [r["id"] for r in listed] == [run_id]


async def test_form_submission_and_bad_requests(make_app: AppFactory, client_for: Any, root: Path) -> None:
    client = client_for(make_app())
    ok = await client.post("/api/runs", data={"folder": str(root / "exp1"), "lang": "zh", "strict": "on"})
    assert ok.status_code == 202, ok.text
    run = await wait_status(client, ok.json()["id"], {"completed"})
    assert run["params"]["lang"] == "zh" and run["params"]["strict"] is True

    outside = root.parent / "secret"
    outside.mkdir()
    for body in ({"folder": str(outside)}, {"folder": "../secret"}, {"folder": "missing"}, {}):
        response = await client.post("/api/runs", json=body)
        assert response.status_code == 400, (body, response.text)
    assert (await client.post("/api/runs", json={"folder": "exp1", "lang": "fr"})).status_code == 400
    assert (
        await client.post("/api/runs", content=b"{nope", headers={"content-type": "application/json"})
    ).status_code == 400
    assert len((await client.get("/api/runs")).json()) == 1


async def test_unknown_and_malformed_run_ids_are_404(make_app: AppFactory, client_for: Any) -> None:
    client = client_for(make_app())
    for path in ("/api/runs/" + "0" * 32, "/api/runs/x' OR 1=1 --", "/api/runs/abc/events", "/api/runs/abc/cancel"):
        method = client.post if path.endswith("cancel") else client.get
        assert (await method(path)).status_code == 404


async def test_cancel_a_running_run(make_app: AppFactory, client_for: Any) -> None:
    job = GatedJob()
    client = client_for(make_app(job))
    run_id = (await client.post("/api/runs", json={"folder": "exp1"})).json()["id"]
    await wait_status(client, run_id, {"running"})
    assert (await client.post(f"/api/runs/{run_id}/cancel")).status_code == 202
    run = await wait_status(client, run_id, {"cancelled"})
    assert run["stop_reasons"] == ["cancelled"]
    assert (await client.post(f"/api/runs/{run_id}/cancel")).status_code == 409
    body = (await client.get(f"/api/runs/{run_id}/events")).text
    events = [json.loads(f["data"]) for f in parse_sse(body) if f.get("event") == "run_event"]
    assert events[-1]["type"] == "report_finished" and events[-1]["status"] == "cancelled"


async def test_full_queue_answers_429_with_retry_after(make_app: AppFactory, client_for: Any) -> None:
    job = GatedJob()
    client = client_for(make_app(job, max_concurrency=1, max_queue=1, retry_after_s=7))
    first = await client.post("/api/runs", json={"folder": "exp1"})
    second = await client.post("/api/runs", json={"folder": "exp1"})
    third = await client.post("/api/runs", json={"folder": "exp1"})
    assert [first.status_code, second.status_code, third.status_code] == [202, 202, 429]
    assert third.headers["retry-after"] == "7"
    await wait_status(client, first.json()["id"], {"running"})
    assert (await client.get(f"/api/runs/{second.json()['id']}")).json()["status"] == "queued"
    job.release[first.json()["id"]].set()
    await wait_status(client, second.json()["id"], {"running"})
    job.release[second.json()["id"]].set()
    await wait_status(client, second.json()["id"], {"completed"})
    assert (await client.post("/api/runs", json={"folder": "exp1"})).status_code == 202


async def test_approval_through_the_gate(make_app: AppFactory, client_for: Any) -> None:
    client = client_for(make_app(approval_job))
    run_id = (await client.post("/api/runs", json={"folder": "exp1"})).json()["id"]
    run = await wait_status(client, run_id, {"paused"})
    (pending,) = [a for a in run["approvals"] if a["status"] == "pending"]
    assert pending["tool"] == "delete_file" and pending["arguments"] == {"path": "a.csv"}
    url = f"/api/runs/{run_id}/approvals/{pending['call_id']}"
    assert (await client.post(f"/api/runs/{run_id}/approvals/nope", json={"decision": "approve"})).status_code == 404
    assert (await client.post(url, json={"decision": "maybe"})).status_code == 422
    decided = await client.post(url, json={"decision": "deny", "by": "alice", "note": "keep it"})
    assert decided.status_code == 200 and decided.json()["status"] == "denied"
    assert (await client.post(url, json={"decision": "approve"})).status_code == 409
    run = await wait_status(client, run_id, {"completed", "degraded"})
    assert run["status"] == "degraded"  # the job saw the denial
    events = [
        json.loads(f["data"]) for f in parse_sse((await client.get(f"/api/runs/{run_id}/events")).text) if "id" in f
    ]
    decided_events = [e for e in events if e["type"] == "approval_decided"]
    assert len(decided_events) == 1 and decided_events[0]["approved"] is False and decided_events[0]["by"] == "alice"


async def test_a_crashing_or_unfinished_job_still_ends_with_report_finished(
    make_app: AppFactory, client_for: Any
) -> None:
    for job, reason in ((crashing_job, "crashed"), (unfinished_job, "job_incomplete")):
        client = client_for(make_app(job))
        run_id = (await client.post("/api/runs", json={"folder": "exp1"})).json()["id"]
        run = await wait_status(client, run_id, {"failed", "completed"})
        assert run["status"] == "failed" and run["stop_reasons"] == [reason]
        frames = parse_sse((await client.get(f"/api/runs/{run_id}/events")).text)
        assert json.loads(frames[-2]["data"])["type"] == "report_finished"
        assert frames[-1]["event"] == "end" and json.loads(frames[-1]["data"])["status"] == "failed"


async def test_sse_replays_after_last_event_id_and_rejects_bad_ids(make_app: AppFactory, client_for: Any) -> None:
    client = client_for(make_app())
    run_id = (await client.post("/api/runs", json={"folder": "exp1"})).json()["id"]
    run = await wait_status(client, run_id, {"completed"})
    url = f"/api/runs/{run_id}/events"
    last = run["last_seq"]
    full = parse_sse((await client.get(url)).text)
    assert [int(f["id"]) for f in full if "id" in f] == list(range(1, last + 1))
    resumed = parse_sse((await client.get(url, headers={"Last-Event-ID": "3"})).text)
    assert [int(f["id"]) for f in resumed if "id" in f] == list(range(4, last + 1))
    at_end = parse_sse((await client.get(url, headers={"Last-Event-ID": str(last)})).text)
    assert [f.get("event") for f in at_end] == ["end"]
    assert next(int(f["id"]) for f in parse_sse((await client.get(url + "?after=5")).text) if "id" in f) == 6
    bad_ids: list[tuple[str | bytes, int]] = [
        ("abc", 400),
        ("-1", 400),
        ("1.5", 400),
        ("9" * 40, 400),
        ("١".encode(), 400),
        (str(last + 1), 409),
    ]
    for bad, status in bad_ids:
        response = await client.get(url, headers={"Last-Event-ID": bad})
        assert response.status_code == status, (bad, response.text)


async def test_event_content_cannot_forge_sse_frames(make_app: AppFactory, client_for: Any, root: Path) -> None:
    forged = 'x\n\nid: 999\nevent: end\ndata: {"status": "completed"}\n\r\nretry: 1\n'
    (root / "exp1" / "job.json").write_text(json.dumps({"events": 2, "text": forged}))
    client = client_for(make_app())
    run_id = (await client.post("/api/runs", json={"folder": "exp1"})).json()["id"]
    await wait_status(client, run_id, {"completed"})
    frames = parse_sse((await client.get(f"/api/runs/{run_id}/events")).text)
    ids = [int(f["id"]) for f in frames if "id" in f]
    assert ids == list(range(1, len(ids) + 1)) and 999 not in ids
    assert [f.get("event") for f in frames].count("end") == 1 and frames[-1]["event"] == "end"
    texts = [json.loads(f["data"]).get("detail", {}).get("text") for f in frames if "id" in f]
    assert texts.count(forged) == 2


async def test_token_protects_the_api(make_app: AppFactory, client_for: Any) -> None:
    client = client_for(make_app(token=SecretStr("s3cret")))
    assert (await client.get("/api/runs")).status_code == 401
    assert (await client.get("/api/runs", headers={"Authorization": "Bearer wrong"})).status_code == 401
    assert (await client.get("/api/runs", headers={"Authorization": "Bearer s3cret"})).status_code == 200
    assert (await client.get("/api/health")).json()["auth_required"] is True
    assert (await client.post("/api/login", json={"token": "nope"})).status_code == 401
    assert (await client.post("/api/login", json={"token": "s3cret"})).status_code == 200
    assert (await client.get("/api/runs")).status_code == 200  # the cookie from the login


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    check_binding(ServerSettings(host="127.0.0.1"))
    check_binding(ServerSettings(host="::1"))
    with pytest.raises(InsecureBinding):
        check_binding(ServerSettings(host="0.0.0.0"))
    check_binding(ServerSettings(host="0.0.0.0", token=SecretStr("t")))


async def test_page_and_headers(make_app: AppFactory, client_for: Any) -> None:
    client = client_for(make_app())
    page = await client.get("/")
    assert page.status_code == 200 and "loopwarden" in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "img-src 'self' data: blob:" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    missing = await client.get("/api/runs/" + "0" * 32)  # an error response gets them too
    assert missing.status_code == 404 and missing.headers["x-frame-options"] == "SAMEORIGIN"
    redoc = await client.get("/redoc")  # loads from a CDN: not under the page's policy
    assert redoc.headers["referrer-policy"] == "no-referrer" and "content-security-policy" not in redoc.headers
    assert (await client.get("/static/app.js")).status_code == 200
    assert "/api/runs/{run_id}/events" in (await client.get("/openapi.json")).json()["paths"]


def test_runs_left_running_are_interrupted_when_the_app_starts(tmp_path: Path, root: Path) -> None:
    settings = make_settings(tmp_path, root)
    store = RunStore(settings.db_path)
    run = store.create_run()
    store.set_status(run.id, "running")
    create_app(settings, ticking_job, config_builder=passthrough)
    assert store.get_run(run.id).status == "interrupted"


async def test_shutdown_interrupts_runs_in_progress(make_app: AppFactory, client_for: Any) -> None:
    job = GatedJob()
    app = make_app(job)
    client = client_for(app)
    run_id = (await client.post("/api/runs", json={"folder": "exp1"})).json()["id"]
    await wait_status(client, run_id, {"running"})
    await app.state.runner.shutdown()
    run = app.state.store.get_run(run_id)
    assert run.status == "interrupted"
    assert [e.type for e in app.state.store.events(run_id)] == ["run_queued", "milestone", "run_interrupted"]


IMPORT_PROBE = """
import sys
from loopwarden.server.jobs import RunRequest, build_job_config, report_installed

data = sys.argv[1]
config = build_job_config(RunRequest(data_dir=data, out_dir=data + "-out", template="brief", strict=True))
print(type(config).__name__, config.template, config.strict, report_installed())
print("pipeline imported:", "loopwarden.report.pipeline" in sys.modules or "pandas" in sys.modules)

sys.modules["pandas"] = None  # as if the report extra were missing
try:
    import loopwarden.report.pipeline
except ModuleNotFoundError as error:
    print("without pandas:", error.name)
for name in [m for m in sys.modules if m.startswith("loopwarden.report") or m == "pandas"]:
    del sys.modules[name]
for name in ("pypdf", "docx", "openpyxl", "matplotlib", "duckdb", "clevercsv"):  # the rest of the extra
    sys.modules[name] = None
import loopwarden.report.pipeline
print("with pandas alone: imported")
"""


def test_a_run_config_is_built_without_the_pipeline_which_needs_only_pandas_to_import(root: Path) -> None:
    """`build_job_config` asks whether the report pipeline is installed by looking for pandas, without
    importing it (a server running another job never needs it): pandas is what its import needs
    beyond the core, and all it needs of the report extra."""
    import subprocess
    import sys

    probe = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, str(root / "exp1")], capture_output=True, text=True, timeout=120
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.splitlines() == [
        "ReportConfig brief True True",
        "pipeline imported: False",
        "without pandas: pandas",
        "with pandas alone: imported",
    ]


async def test_a_run_says_running_before_its_job_is_woken_by_a_decision(
    make_app: AppFactory, client_for: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision is made on a web worker thread and the job goes on on the event loop: were
    "running" written after the job was woken, it could land on the status the job ended with
    (a finished run read "running" for good: seen in tests/e2e/test_web_page.py)."""
    from loopwarden.policy.approval import ApprovalGate

    seen: list[str] = []
    wake = ApprovalGate.decide

    def decide(
        self: ApprovalGate, call_id: str, approve: bool, reason: str | None = None, *, by: str | None = None
    ) -> None:
        seen.extend(run.status for run in RunStore(tmp_path / "state" / "runs.db").list_runs())
        wake(self, call_id, approve, reason, by=by)

    monkeypatch.setattr(ApprovalGate, "decide", decide)
    client = client_for(make_app(approval_job))
    run_id = (await client.post("/api/runs", json={"folder": "exp1"})).json()["id"]
    run = await wait_status(client, run_id, {"paused"})
    url = f"/api/runs/{run_id}/approvals/{run['approvals'][0]['call_id']}"
    assert (await client.post(url, json={"decision": "approve"})).status_code == 200
    assert (await wait_status(client, run_id, {"completed"}))["status"] == "completed"
    assert seen == ["running"]
