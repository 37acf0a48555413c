"""A real run through the OpenAI-compatible client (the official SDK, a real HTTP server on
127.0.0.1) recorded as a cassette, turned into an eval case in one command, and replayed
offline: the badcase becomes a regression test."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from loopwarden import Agent, Budgets, Ladder, LoopConfig, tool
from loopwarden.cli import build_app
from loopwarden.eval.case import load_case
from loopwarden.eval.runner import run_case
from loopwarden.models.cassette import RecordingModel, load_cassette
from loopwarden.models.config import EndpointConfig
from loopwarden.models.openai_compat import build_model
from openai_server import Reply, ScriptedServer, completion, error, reply, tool_call, usage


@tool
def run_command(command: str) -> str:
    """Run a shell command in the repository.

    Args:
        command: the command line
    """
    return "On branch main\nnothing to commit, working tree clean"


def collapsing(body: dict[str, Any]) -> Reply:
    """The endpoint's model has collapsed: `git status`, whatever it is told."""
    if not body.get("tools"):
        return reply(completion("Nothing to review.", usage_=usage(50, 5)))
    return reply(completion(None, [tool_call("run_command", {"command": "git status"})], usage_=usage(80, 9)))


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


async def test_a_recorded_endpoint_run_replays_offline_as_a_case(server: ScriptedServer, tmp_path: Path) -> None:
    server.respond = collapsing
    server.push(error(429, "slow down", retry_after="0"))  # absorbed by the client's own retries
    config = EndpointConfig(
        base_url=server.base_url,
        api_key="sk-e2e-key-0123456789",
        cheap_model="test-model",
        main_model="test-main",
        timeout=5.0,
        max_retries=2,
        retry_base_delay=0.01,
    )
    recorder = RecordingModel(build_model(config, "cheap"))
    unguarded = LoopConfig(
        ladder=Ladder(nudge_at=10**9, narrow_at=10**9, stop_at=10**9),
        budgets=Budgets(max_tool_rounds=8, max_model_calls=8),
        wrap_up=False,
    )
    run = await Agent(recorder, [run_command], config=unguarded, detectors=[]).run("Review my changes.")
    assert run.totals.model_calls == 8 and run.stop_reason == "tool_round_budget"
    cassette_path = recorder.save(tmp_path / "prod.cassette.json")
    cassette = load_cassette(cassette_path)
    assert len(cassette.interactions) == 8
    assert cassette.interactions[0].reply is not None and cassette.interactions[0].reply.usage.prompt_tokens == 80

    case_file = tmp_path / "prod-badcase.yaml"
    imported = CliRunner().invoke(build_app(), ["eval-import", str(cassette_path), "-o", str(case_file)])
    assert imported.exit_code == 0, imported.output

    requests_before = len(server.requests)
    first, second = await asyncio.gather(run_case(load_case(case_file)), run_case(load_case(case_file)))
    assert len(server.requests) == requests_before  # replay never touches the endpoint
    assert first.passed, first.reasons
    assert first.stop_reason == "repeated_call" and first.model_calls < 8 and first.tool_executions == 1
    assert first.model_dump() == second.model_dump()
