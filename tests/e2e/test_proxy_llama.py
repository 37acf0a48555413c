"""The proxy in front of a real model server: llama-cpp-python's, serving Gemma 3 270M
(tests/llama_server.py; skipped where it is not built, built and run by CI). The `openai` SDK talks
to the proxy as it would to the server: `/v1/models` passes through, a greedy answer comes back
through the proxy, streamed and not, with every field the server sends, and a tool loop the client
runs through the proxy ends within the guard's bound with every exchange kept in the run store and
the key nowhere in what the proxy logs or stores."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from llama_server import LlamaServer
from loopwarden.proxy.app import create_proxy
from loopwarden.proxy.history import conversation_id
from loopwarden.proxy.settings import build_settings
from loopwarden.trace.store import RunStore
from proxykit import FINISH, READ_FILE
from server_jobs import serve_in_thread

pytestmark = pytest.mark.slow

KEY = "sk-proxy-llama-test-key"
NOTES = "notes.txt: Hall probe scan. Peak field 12.4 mT at x = 3.0 mm; noise 0.05 mT."
TOOL_ROUNDS = 6
"""The proxy's budget of tool rounds per task (`--max-tool-rounds`): a model that reads a new path
every turn repeats no call, so the budget is what ends it."""
MAX_TURNS = 12
"""The client gives up after this many requests; the guard must end the task before (it narrows
to `finish` at the fourth identical call, stops at the fifth, and wraps up after TOOL_ROUNDS)."""


TASK: list[dict[str, Any]] = [
    {"role": "system", "content": "Use the functions: read the file, then call finish with the answer."},
    {"role": "user", "content": "Read notes.txt and report the peak field."},
]


def tool_loop(client: OpenAI, **request: Any) -> tuple[str, int, list[tuple[str, str]]]:
    """A coding agent's loop: run each requested tool, ask again; a `finish` call or a reply
    with no tool calls ends it. Returns (final text, requests made, (tool, arguments) called)."""
    messages = list(TASK)
    called: list[tuple[str, str]] = []
    for turn in range(1, MAX_TURNS + 1):
        response = client.chat.completions.create(messages=messages, tools=[READ_FILE, FINISH], **request)  # type: ignore[arg-type,call-overload]
        message = response.choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]  # type: ignore[union-attr]
        called += [(name, arguments) for _, name, arguments in calls]
        if not calls:
            return message.content or "", turn, called
        if any(name == "finish" for _, name, _ in calls):
            return next(a for _, n, a in calls if n == "finish"), turn, called
        messages.append(
            {
                "role": "assistant",
                "content": message.content or "",  # this server refuses a null content
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": i, "content": NOTES} for i, _, _ in calls]
    raise AssertionError(f"the task did not end within {MAX_TURNS} requests: {called}")


def ask(client: OpenAI, question: str, stream: bool) -> tuple[str, str | None, set[str]]:
    """(text, finish reason, the fields of the reply and of its first choice). Each question is
    asked once: this server answers a prompt it has fully cached with nothing."""
    request: dict[str, Any] = {
        "model": "gemma",
        "messages": [{"role": "user", "content": question}],
        "temperature": 0,
        "max_tokens": 24,
    }
    if not stream:
        raw = client.chat.completions.with_raw_response.create(**request)
        data = json.loads(raw.content)
        choice = data["choices"][0]
        return choice["message"]["content"] or "", choice["finish_reason"], {*data, *choice}
    text, finish, fields = "", None, set()
    for chunk in client.chat.completions.create(**request, stream=True):
        for part in chunk.choices:
            text += part.delta.content or ""
            finish = part.finish_reason or finish
            fields |= {*chunk.model_dump(exclude_unset=True), *part.model_dump(exclude_unset=True)}
    return text, finish, fields


def canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments


def with_logs(caplog: pytest.LogCaptureFixture, run: Callable[[], None]) -> str:
    with caplog.at_level(logging.DEBUG):
        run()
    return "\n".join(r.getMessage() for r in caplog.records)


def test_the_openai_sdk_through_the_proxy_to_a_real_model(
    llama_server: LlamaServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "proxy.db"
    settings = build_settings(upstream=llama_server.base_url, db=db, terminal=["finish"], max_tool_rounds=TOOL_ROUNDS)
    direct = OpenAI(base_url=llama_server.base_url, api_key=KEY, max_retries=0, timeout=300)
    outcome: dict[str, Any] = {}

    def through_the_proxy() -> None:
        with serve_in_thread(create_proxy(settings)) as base:
            proxied = OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=300)
            outcome["models"] = [m.id for m in proxied.models.list()]
            outcome["json"] = ask(proxied, "Name a primary colour of light.", stream=False)
            outcome["stream"] = ask(proxied, "Name a planet of the solar system.", stream=True)
            # Left to choose ("auto"), this model answers with nothing; forced to read, it reads every
            # turn, as a collapsing agent does, and the guard has to end it.
            forced = {"type": "function", "function": {"name": "read_file"}}
            outcome["loop"] = tool_loop(proxied, model="gemma", tool_choice=forced, max_tokens=96, temperature=0)

    logged = with_logs(caplog, through_the_proxy)

    assert outcome["models"] == [m.id for m in direct.models.list()] and outcome["models"]
    _, _, direct_fields = ask(direct, "Name a colour of the rainbow.", stream=False)
    _, _, direct_stream_fields = ask(direct, "Name a moon of Jupiter.", stream=True)
    for (text, finish, fields), expected in (
        (outcome["json"], direct_fields),
        (outcome["stream"], direct_stream_fields),
    ):
        assert text.strip() and finish in ("stop", "length"), (text, finish)  # the model's answer came through
        assert fields == expected  # every field the server sends, llama.cpp's own included, reached the client

    text, turns, called = outcome["loop"]
    print(f"\nreal model through the proxy: {turns} requests, tools {called}; ended with {text[:120]!r}")
    store = RunStore(db)
    assert {r.kind for r in store.list_runs()} == {"proxy"}
    events = [e.model_dump(mode="json") for run in store.list_runs() for e in store.events(run.id)]
    task = [e.model_dump(mode="json") for e in store.events(conversation_id(TASK) + "-t1")]  # the proxy's run id
    assert sum(1 for e in task if e["type"] == "model_called") == turns  # every upstream exchange, once
    actions = [e["action"] for e in task if e["type"] == "guard_verdict" and e.get("call_id")]
    assert len(actions) == len(called)  # a verdict on every call the real model made
    same = [(name, canonical(arguments)) for name, arguments in called if name != "finish"]
    repeats = max((same.count(c) for c in same), default=0)  # identical calls, spacing aside
    if "stopped" in actions:  # the guard, not the model, ended it: the client was told why
        assert "loopwarden stopped this task" in text
    elif repeats >= settings.policy.config.ladder.narrow_at:  # narrowed to the declared finishing tool
        assert "narrowed" in actions and called[-1][0] == "finish"
    assert turns <= TOOL_ROUNDS + 2  # the budget's bound (+ the wrap-up)

    assert KEY not in logged
    assert KEY not in db.read_bytes().decode("utf-8", "replace")
    assert not any(KEY in json.dumps(e) for e in events)
