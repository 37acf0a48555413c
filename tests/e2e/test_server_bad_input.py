"""Every malformed path, id or query value gets a 4xx with a one-line reason from the real server
(uvicorn over TCP), never a 5xx, while a run keeps writing into its folder: files appear and
vanish between listing and stat, matplotlib lock files come and go, and the internal `.sandbox/`,
`.build/` and `_check/` folders are there. Property-tested with hypothesis over raw requests."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from loopwarden.events import Event, EventStamper  # noqa: E402
from loopwarden.report.events import Milestone, ReportFinished  # noqa: E402
from loopwarden.server.app import create_app  # noqa: E402
from loopwarden.server.settings import ServerSettings  # noqa: E402
from server_jobs import serve_in_thread  # noqa: E402

STOP = threading.Event()
INTERNAL = (".sandbox/fig1/mpl/fontlist.json", ".build/report.log", "_check/report.tex", ".report.tex.partial")


async def churning_job(config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
    """Writes like a report run: outputs, internal folders, lock files and temporary files that
    vanish at once, a link out of the folder and a FIFO, until the tests are done."""
    stamp = EventStamper(run_id or "x", start_seq)
    out = Path(config.out_dir)
    (out / "figures").mkdir(exist_ok=True)
    (out / "report.md").write_text("# Report\n")
    (out / "figures" / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"x" * 100)
    for name in INTERNAL:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("internal")
    (out / "leak.txt").symlink_to("/etc/passwd")
    os.mkfifo(out / "pipe")
    i = 0
    while not STOP.is_set():
        i += 1
        lock = out / ".sandbox" / "fig1" / "mpl" / f".matplotlib_lock-{i}"
        temp = out / "figures" / f"tmp{i}.png"
        lock.write_text("")
        temp.write_bytes(b"x")
        await asyncio.sleep(0)
        lock.unlink()
        temp.unlink()
        if i % 50 == 0:
            yield stamp(Milestone, index=1, total=2, stage="churn", state="started", detail={"i": i})
        await asyncio.sleep(0.002)
    yield stamp(ReportFinished, status="completed")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("bad-input")
    (root / "allowed" / "exp").mkdir(parents=True)
    (root / "allowed" / "exp" / "a.csv").write_text("x\n1\n")
    settings_ = ServerSettings(
        db_path=root / "state" / "runs.db", runs_dir=root / "state" / "runs", allowed_roots=[root / "allowed"]
    )
    STOP.clear()
    with serve_in_thread(create_app(settings_, job=churning_job)) as base:
        status, body = request(base, "POST", "/api/runs", {"folder": str(root / "allowed" / "exp")})
        assert status == 202, body
        run_id = json.loads(body)["id"]
        try:
            yield base, run_id
        finally:
            STOP.set()


def request(base: str, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    """One raw request: the path goes on the request line exactly as given."""
    connection = http.client.HTTPConnection(urlsplit(base).netloc, timeout=60)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        # An event stream of a live run never ends: its status line is the answer.
        data = b"" if response.getheader("content-type", "").startswith("text/event-stream") else response.read()
        return response.status, data
    finally:
        connection.close()


def assert_clean(status: int, body: bytes, what: str) -> None:
    assert status < 500, f"{what} -> {status}: {body[:300]!r}"
    if 400 <= status < 500 and body.startswith(b"{"):
        detail = json.loads(body)["detail"]
        assert isinstance(detail, str) and "\n" not in detail and detail.strip(), (what, detail)


def encode(text: str, safe: str) -> str:
    return quote(text, safe=safe, errors="surrogatepass")  # lone surrogates: bytes that are not UTF-8


NASTY = st.sampled_from(
    [
        "\x00", "..", "../..", "%2e%2e", "..%2F..%2Fetc%2Fpasswd", "%2F", "/", "//", ".sandbox", ".build/report.log",
        "_check/report.tex", ".sandbox/fig1/mpl/fontlist.json", "leak.txt", "pipe", "figures", "figures/plot.png",
        "report.md", "events.jsonl", "\udcff", "é", "a" * 5000, "%00", "\\..\\", "~", "-1", "9" * 40, "",
    ]
)  # fmt: skip
TEXT = st.one_of(NASTY, st.text(max_size=60), st.lists(NASTY, max_size=4).map("/".join))
NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["1e9", "0x10", " 5", "5 ", "NaN", "inf", "-0", "+3", "٣", "1_000", ""]),
)


@st.composite
def requests(draw: st.DrawFn, run_id: str) -> tuple[str, str]:
    safe = draw(st.sampled_from(["", "/", "/%", ".~"]))
    run = draw(st.one_of(st.just(run_id), TEXT))
    r = encode(run, "" if safe == "" else ".")
    name = encode(draw(TEXT), safe)
    kind = draw(st.sampled_from(["run", "artifacts", "artifact", "events", "approvals", "list", "static", "decide"]))
    value = encode(draw(st.one_of(NUMBER, TEXT)), "")
    key = draw(st.sampled_from(["limit", "offset", "status", "after", "download"]))
    paths = {
        "run": ("GET", f"/api/runs/{r}"),
        "artifacts": ("GET", f"/api/runs/{r}/artifacts?{key}={value}"),
        "artifact": ("GET", f"/api/runs/{r}/artifacts/{name}?download={value}"),
        "events": ("GET", f"/api/runs/{r}/events?after={value}"),
        "approvals": ("GET", f"/api/runs/{r}/approvals"),
        "list": ("GET", f"/api/runs?{key}={value}&{draw(st.sampled_from(['limit', 'offset']))}={value}"),
        "static": ("GET", f"/static/{name}"),
        "decide": ("POST", f"/api/runs/{r}/approvals/{name}"),
    }
    return paths[kind]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_no_malformed_path_or_query_value_gets_a_5xx(server: tuple[str, str], data: st.DataObject) -> None:
    base, run_id = server
    method, path = data.draw(requests(run_id))
    body = {"decision": data.draw(st.sampled_from(["approve", "deny", "maybe", ""]))} if method == "POST" else None
    status, answer = request(base, method, path, body)
    assert_clean(status, answer, f"{method} {path[:200]}")


def test_each_reported_case_is_a_clear_4xx(server: tuple[str, str]) -> None:
    base, run_id = server
    cases = {
        f"/api/runs/{run_id}/artifacts/report%00.md": (400, "control character"),
        f"/api/runs/{run_id}/artifacts/..%2F..%2Fruns.db": (400, "'..'"),
        f"/api/runs/{run_id}/artifacts/.sandbox/fig1/mpl/fontlist.json": (404, "no such artifact"),
        f"/api/runs/{run_id}/artifacts/.build/report.log": (404, "no such artifact"),
        f"/api/runs/{run_id}/artifacts/_check/report.tex": (404, "no such artifact"),
        f"/api/runs/{run_id}/artifacts/leak.txt": (404, "no such artifact"),
        f"/api/runs/{run_id}/artifacts/pipe": (404, "no such artifact"),
        f"/api/runs?offset={2**70}": (422, "query parameter offset"),
        "/api/runs?limit=99999999999999999999999": (422, "query parameter limit"),
        f"/api/runs/{run_id}/events?after={'9' * 30}": (400, "too long"),
    }
    for path, (expected, reason) in cases.items():
        status, body = request(base, "GET", path)
        assert status == expected, (path, status, body)
        detail = json.loads(body)["detail"]
        assert reason in detail and "\n" not in detail, (path, detail)


def test_the_listing_survives_files_vanishing_and_hides_internal_folders(server: tuple[str, str]) -> None:
    base, run_id = server
    for _ in range(100):  # the job creates and deletes files between every two looks
        status, body = request(base, "GET", f"/api/runs/{run_id}/artifacts")
        assert status == 200, body
        names = [f["name"] for f in json.loads(body)]
        assert "report.md" in names and "figures/plot.png" in names
        assert not [n for n in names if n.startswith((".", "_check")) or "/." in n], names
        assert "leak.txt" not in names and "pipe" not in names
    status, body = request(base, "GET", f"/api/runs/{run_id}/artifacts/figures/plot.png")
    assert status == 200 and body.startswith(b"\x89PNG")
