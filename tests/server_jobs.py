"""Scripted jobs and a real-uvicorn helper for the server tests. The jobs stand in for the report
pipeline (which is tested on its own); they yield real events through the real runner and store."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from loopwarden.events import ApprovalDecided, ApprovalRequired, Event, EventStamper, Totals
from loopwarden.policy.approval import ApprovalGate, PendingCall
from loopwarden.report.events import Milestone, ReportFinished

# One client for every request of these tests (no connection kept open, so a killed server leaves
# no stale one): `httpx.get` builds a client, and with it an SSL context, per call (about 70 ms of
# CPU), which polled every 50 ms kept a core busy while the servers under test started.
HTTP = httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0))


def report_without_pdf(
    config: Any, *, run_id: str | None = None, start_seq: int = 0, approvals: ApprovalGate | None = None
) -> AsyncIterator[Event]:
    """The real report pipeline as the server runs it, with xelatex treated as missing (no PDF): for
    the tests whose point is the run's approvals, not its PDF (xelatex was about 3 s of CPU a run).
    The PDF of a server run is checked by tests/e2e/test_web_page.py."""
    from loopwarden.report.pipeline import run_report
    from reportkit import NO_LATEX

    return run_report(config, run_id=run_id, start_seq=start_seq, approvals=approvals, toolchain=NO_LATEX)


def job_spec(config: Any) -> dict[str, Any]:
    path = Path(config.data_dir) / "job.json"
    return json.loads(path.read_text()) if path.exists() else {}


async def ticking_job(config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
    """`events` milestones `delay` seconds apart (from data_dir/job.json), a report.md, then
    report_finished. `text` goes into every milestone's detail (for escaping tests)."""
    spec = job_spec(config)
    n, delay, text = int(spec.get("events", 5)), float(spec.get("delay", 0.0)), spec.get("text", "")
    stamp = EventStamper(run_id or "x", start_seq)
    for i in range(1, n + 1):
        yield stamp(Milestone, index=i, total=n, stage=f"stage-{i}", state="done", detail={"text": text, "i": i})
        await asyncio.sleep(delay)
    out = Path(config.out_dir)
    (out / "report.md").write_text(f"# Report\n\n{text}\n", encoding="utf-8")
    (out / "figures").mkdir(exist_ok=True)
    (out / "figures" / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (out / "page.html").write_text("<script>alert(1)</script>", encoding="utf-8")
    yield stamp(ReportFinished, status="completed", totals=Totals(model_calls=n), outputs={"markdown": "report.md"})


class GatedJob:
    """Yields one milestone, then waits until the test opens `release` (or forever)."""

    def __init__(self) -> None:
        self.release: dict[str, asyncio.Event] = {}
        self.started: list[str] = []

    async def __call__(self, config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
        assert run_id is not None
        stamp = EventStamper(run_id, start_seq)
        self.started.append(run_id)
        gate = self.release.setdefault(run_id, asyncio.Event())
        yield stamp(Milestone, index=1, total=2, stage="wait", state="started")
        await gate.wait()
        yield stamp(Milestone, index=1, total=2, stage="wait", state="done")
        yield stamp(ReportFinished, status="completed")


async def approval_job(
    config: Any, *, run_id: str | None = None, start_seq: int = 0, approvals: ApprovalGate | None = None
) -> AsyncIterator[Event]:
    """Asks for approval of one call through the core ApprovalGate, as the loop does."""
    assert run_id is not None and approvals is not None
    stamp = EventStamper(run_id, start_seq)
    call = PendingCall(call_id=f"call-{run_id[:6]}", tool="delete_file", arguments={"path": "a.csv"}, turn=1)
    yield stamp(ApprovalRequired, turn=1, call_id=call.call_id, tool=call.tool, arguments=call.arguments, args_hash="h")
    decision = await approvals.wait(call)
    yield stamp(
        ApprovalDecided, turn=1, call_id=call.call_id, tool=call.tool, approved=decision.approve, by=decision.by
    )
    yield stamp(ReportFinished, status="completed" if decision.approve else "degraded", message="decided")


async def crashing_job(config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
    stamp = EventStamper(run_id or "x", start_seq)
    yield stamp(Milestone, index=1, total=1, stage="boom", state="started")
    raise RuntimeError("the job broke")


async def unfinished_job(config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
    stamp = EventStamper(run_id or "x", start_seq)
    yield stamp(Milestone, index=1, total=1, stage="only", state="done")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """A real uvicorn on 127.0.0.1 in a thread; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


def parse_sse(text: str) -> list[dict[str, str]]:
    """Frames of an SSE body, per the spec's line rules (comments dropped)."""
    frames: list[dict[str, str]] = []
    frame: dict[str, str] = {}
    data: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if data or frame:
                if data:
                    frame["data"] = "\n".join(data)
                frames.append(frame)
            frame, data = {}, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        else:
            frame[field] = value
    return frames
