"""`loopwarden doctor` against a real 127.0.0.1 server: what it finds and what it tells."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from loopwarden.cli import build_app
from openai_server import Reply, ScriptedServer, completion, error, reply, tool_call

KEY = "sk-doctor-key-0123456789"


def capable(body: dict[str, Any]) -> Reply:
    """A model that calls a tool when offered one, and answers in text otherwise."""
    if body.get("tools"):
        return reply(completion(None, [tool_call("report_number", {"number": 7})]))
    return reply(completion("ready"))


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(respond=capable) as s:
        yield s


def doctor(tmp_path: Path, *args: str, **env: str | None) -> tuple[int, str]:
    clean: dict[str, str | None] = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path),
        "DEEPSEEK_API_KEY": None,
        "OPENAI_API_KEY": None,
        "LOOPWARDEN_API_KEY": None,
        "LOOPWARDEN_BASE_URL": None,
        "LOOPWARDEN_CONFIG": None,
        "COLUMNS": "200",
    }
    result = CliRunner().invoke(build_app(), ["doctor", *args], env=clean | env)
    return result.exit_code, result.output


def args_for(server: ScriptedServer, model: str = "test-model") -> list[str]:
    return ["--base-url", server.base_url, "--model", model, "--timeout", "5"]


def test_a_healthy_endpoint_passes_every_check(server: ScriptedServer, tmp_path: Path) -> None:
    code, out = doctor(tmp_path, *args_for(server), LOOPWARDEN_API_KEY=KEY)
    assert code == 0, out
    for line in ("✓ endpoint", "✓ cheap model", "✓ main model", "✓ chat", "✓ tool calling", "ready"):
        assert line in out
    assert KEY not in out
    assert server.requests[-1]["tools"][0]["function"]["name"] == "report_number"


def test_a_separate_main_model_is_asked_too(server: ScriptedServer, tmp_path: Path) -> None:
    code, out = doctor(
        tmp_path, "--base-url", server.base_url, LOOPWARDEN_CHEAP_MODEL="test-model", LOOPWARDEN_MAIN_MODEL="test-main"
    )
    assert code == 0, out
    assert "✓ main chat: 'test-main' answered" in out
    assert {r["model"] for r in server.requests} == {"test-model", "test-main"}


def test_a_missing_model_is_named_with_what_is_offered(server: ScriptedServer, tmp_path: Path) -> None:
    server.models = ["qwen3:8b", "llama3"]
    server.respond = lambda body: error(404, "model 'nope' not found")
    code, out = doctor(tmp_path, *args_for(server, "nope"))
    assert code == 1
    assert "'nope' is not offered" in out and "qwen3:8b" in out
    assert "LOOPWARDEN_CHEAP_MODEL" in out


def test_a_rejected_key_says_how_to_set_one(server: ScriptedServer, tmp_path: Path) -> None:
    server.models_reply = error(401, f"Incorrect API key provided: {KEY}")
    code, out = doctor(tmp_path, *args_for(server), LOOPWARDEN_API_KEY=KEY)
    assert code == 1
    assert "✗ API key" in out and "LOOPWARDEN_API_KEY" in out
    assert KEY not in out


def test_a_server_without_tool_calling_gets_the_server_flags_to_use(server: ScriptedServer, tmp_path: Path) -> None:
    server.respond = lambda body: reply(completion("report_number(7)"))
    code, out = doctor(tmp_path, *args_for(server))
    assert code == 1
    assert "✓ chat" in out and "✗ tool calling" in out
    assert "--enable-auto-tool-choice" in out


def test_an_endpoint_without_a_model_list_is_checked_by_chat(server: ScriptedServer, tmp_path: Path) -> None:
    server.models_reply = error(404, "no such route")
    code, out = doctor(tmp_path, *args_for(server))
    assert code == 0, out
    assert "does not list its models" in out and "✓ tool calling" in out


def test_an_unreachable_endpoint(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, out = doctor(tmp_path, "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m", "--timeout", "2")
    assert code == 1
    assert "✗ endpoint" in out and "check --base-url" in out


def test_nothing_configured_says_how_to_configure(tmp_path: Path) -> None:
    code, out = doctor(tmp_path)
    assert code == 1
    assert "no model endpoint is configured" in out and "DEEPSEEK_API_KEY" in out


def test_a_bad_preset_is_a_configuration_error(tmp_path: Path) -> None:
    code, out = doctor(tmp_path, "--preset", "nope")
    assert code == 2
    assert "unknown preset" in out


NULL_CONTENT_500 = (
    "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, 'typed-dict', 'content'), "
    "'msg': 'Input should be a valid string', 'input': None}"
)


def strict(body: dict[str, Any]) -> Reply:
    """A server that rejects `"content": null` on a tool-call turn, as llama-cpp-python does."""
    if any(m["role"] == "assistant" and "content" in m and m["content"] is None for m in body["messages"]):
        return error(500, NULL_CONTENT_500)
    if body["messages"][-1]["role"] == "tool":
        return reply(completion("The number is 7."))
    return capable(body)


def test_the_tool_round_trip_sends_the_loops_own_second_turn(server: ScriptedServer, tmp_path: Path) -> None:
    server.respond = strict
    code, out = doctor(tmp_path, *args_for(server))
    assert code == 0, out
    assert "✓ tool round trip" in out and "'The number is 7.'" in out
    assert "accepted with content empty, omit" in out and "null rejected (messages[1].content)" in out
    second = [r for r in server.requests if r["messages"][-1]["role"] == "tool"]
    assert len(second) == 3  # one per shape
    turn = second[0]["messages"]
    assert turn[2]["role"] == "assistant" and turn[2]["tool_calls"][0]["function"]["name"] == "report_number"
    assert turn[3]["tool_call_id"] == turn[2]["tool_calls"][0]["id"]
    assert json.loads(turn[3]["content"]) == {"ok": True, "data": 7}


def test_a_configured_shape_the_server_rejects_is_named_with_the_fix(server: ScriptedServer, tmp_path: Path) -> None:
    server.respond = strict
    code, out = doctor(tmp_path, *args_for(server), LOOPWARDEN_TOOL_CALL_CONTENT="null")
    assert code == 0, out
    assert "! tool round trip" in out and "LOOPWARDEN_TOOL_CALL_CONTENT=empty" in out


def test_a_round_trip_no_shape_survives_fails(server: ScriptedServer, tmp_path: Path) -> None:
    server.respond = lambda body: error(500, NULL_CONTENT_500) if len(body["messages"]) > 2 else capable(body)
    code, out = doctor(tmp_path, *args_for(server))
    assert code == 1
    assert "✗ tool round trip" in out and "no second reply after a tool result" in out


def test_no_key_is_never_called_accepted(server: ScriptedServer, tmp_path: Path) -> None:
    code, out = doctor(tmp_path, *args_for(server))
    assert code == 0, out
    assert "key accepted" not in out and "no key sent" in out


def test_the_llamacpp_preset_accepts_any_model_name(server: ScriptedServer, tmp_path: Path) -> None:
    server.models = ["/models/gemma-3-270m-q4_k_m.gguf"]
    code, out = doctor(tmp_path, "--preset", "llamacpp", "--base-url", server.base_url, "--timeout", "5")
    assert code == 0, out
    assert "✓ cheap model: 'default': this server answers any model name" in out
