"""Exploration through the real OpenAI SDK against a real HTTP server on 127.0.0.1: the server
plays a collapsing LLM (always `read_file(a.txt)`, streamed), and a well-behaved one that reads,
hits an out-of-bounds path, corrects itself and finishes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwarden.events import Event, EventStamper
from loopwarden.models.config import EndpointConfig
from loopwarden.models.openai_compat import build_model
from loopwarden.report.events import ExplorationCutOff, ExplorationDone
from loopwarden.report.explore.loop import CUT_OFF_MESSAGE, explore
from loopwarden.report.folder.scan import scan_folder
from openai_server import Reply, ScriptedServer, stream, tool_call


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.txt").write_text("The pump was run at 3 speeds; flow rose linearly with speed.\n")
    (root / "flow.csv").write_text("speed_rpm,flow_lpm\n100,4.1\n200,8.2\n300,12.4\n")
    return root


def config_for(server: ScriptedServer) -> EndpointConfig:
    return EndpointConfig(
        base_url=server.base_url,
        api_key="sk-e2e-key-0123456789",
        cheap_model="test-cheap",
        main_model="test-main",
        timeout=5.0,
        max_retries=1,
        stream=True,
    )


def run(data: Path, server: ScriptedServer) -> list[Event]:
    model = build_model(config_for(server), "cheap")

    async def collect() -> list[Event]:
        stamper = EventStamper("e2e")
        return [e async for e in explore(data, data.parent / "out", model, stamper=stamper, scan=scan_folder(data))]

    return asyncio.run(collect())


def test_collapsing_llm_over_http_is_cut_off(data: Path, server: ScriptedServer) -> None:
    server.respond = lambda body: stream(None, [tool_call("read_file", {"path": "a.txt"})])
    events = run(data, server)
    assert len(server.requests) <= 6
    cut = next(e for e in events if isinstance(e, ExplorationCutOff))
    assert cut.message == CUT_OFF_MESSAGE
    done = events[-1]
    assert isinstance(done, ExplorationDone) and done.record.degraded
    first = server.requests[0]
    assert first["model"] == "test-cheap"
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert {"list_dir", "read_file", "read_image", "finish_exploration"} <= set(offered)
    assert set(offered["finish_exploration"]["required"]) == {"experiment", "goal", "key_findings"}
    # The ladder narrowed before stopping: one request forced the terminal tool.
    forced = [r.get("tool_choice") for r in server.requests if isinstance(r.get("tool_choice"), dict)]
    assert forced and forced[0]["function"]["name"] == "finish_exploration"


def test_llm_corrects_an_out_of_bounds_path_and_finishes(data: Path, server: ScriptedServer) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return stream(None, [tool_call("read_file", {"path": "../../etc/passwd"})])
        if len(results) == 1:
            assert "out of bounds" in results[0]["message"]
            return stream(None, [tool_call("read_file", {"path": "flow.csv"})])
        findings = {"experiment": "Pump flow test", "goal": "flow vs speed", "key_findings": ["flow 4.1-12.4 L/min"]}
        return stream(None, [tool_call("finish_exploration", findings)])

    server.respond = respond
    events = run(data, server)
    done = events[-1]
    assert isinstance(done, ExplorationDone)
    assert not done.record.degraded and done.record.experiment == "Pump flow test"
    assert done.record.coverage.entry("flow.csv").status == "read"  # type: ignore[union-attr]
    assert done.record.tables[0].columns == ["speed_rpm", "flow_lpm"]
