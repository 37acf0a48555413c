"""The proxy between the real `openai` SDK and a scripted upstream, both real HTTP on 127.0.0.1:
a collapsing model is stopped within the in-process runtime's bound, streaming and not; a healthy
run passes untouched; every exchange lands in the run store."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from loopwarden.guard.budget import HARD_BUDGET_REASONS
from loopwarden.trace.store import RunStore
from openai_server import Reply, ScriptedServer, completion, reply, stream, tool_call
from proxykit import FINISH, READ_FILE, client_loop, honouring_tool_choice, in_process_phase_calls, proxy_in_front


def always(call_name: str, arguments: dict[str, Any], *, streaming: bool = False) -> Any:
    def respond(body: dict[str, Any]) -> Reply:
        calls = [tool_call(call_name, arguments)]
        return stream(tool_calls=calls) if streaming else reply(completion(tool_calls=calls))

    return respond


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_collapse_is_stopped_within_the_in_process_bound(streaming: bool) -> None:
    bound = in_process_phase_calls()
    with ScriptedServer(respond=always("read_file", {"path": "a.txt"}, streaming=streaming)) as upstream:
        with proxy_in_front(upstream) as base:
            text, turns, _ = client_loop(base, "summarise a.txt", lambda n, a: "hello from a.txt", stream=streaming)
        assert len(upstream.requests) == bound == turns
        assert "loopwarden stopped this task: repeated_call" in text
        # the nudge went upstream after the third identical result, and the tool was narrowed away after the fourth
        nudged = [
            r
            for r in upstream.requests
            if any(m.get("role") == "user" and m is not r["messages"][0] for m in r["messages"])
        ]
        assert len(nudged) == 2 and len(upstream.requests[3]["messages"]) == 8
        assert upstream.requests[4]["tool_choice"] == "none"
        assert all(r.get("tool_choice") is None for r in upstream.requests[:4])


def test_narrowing_forces_the_declared_terminal_tool() -> None:
    with ScriptedServer(respond=always("read_file", {"path": "a.txt"})) as upstream:
        with proxy_in_front(upstream, terminal=["finish"]) as base:
            client_loop(base, "summarise a.txt", lambda n, a: "same", tools=[READ_FILE, FINISH])
        assert upstream.requests[4]["tool_choice"] == {"type": "function", "function": {"name": "finish"}}


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_a_healthy_run_passes_untouched(streaming: bool) -> None:
    script = [
        (stream if streaming else lambda **k: reply(completion(**k)))(
            tool_calls=[tool_call("read_file", {"path": f"f{i}.txt"})]
        )
        for i in range(14)
    ] + [(stream if streaming else lambda **k: reply(completion(**k)))(text="All fourteen files say hello.")]
    with ScriptedServer() as upstream:
        upstream.push(*script)
        with proxy_in_front(upstream) as base:
            text, turns, messages = client_loop(base, "read all", lambda n, a: f"hello {a}", stream=streaming)
        assert text == "All fourteen files say hello." and turns == 15
        for sent in upstream.requests:  # nothing added, nothing removed
            assert "tool_choice" not in sent
            assert sent["tools"] == [READ_FILE]
        assert upstream.requests[-1]["messages"] == messages


def test_every_exchange_is_kept_as_a_run(tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    with ScriptedServer(respond=always("read_file", {"path": "a.txt"})) as upstream:
        with proxy_in_front(upstream, db=db) as base:
            client_loop(base, "summarise a.txt", lambda n, a: "hello")
        proxied_calls = len(upstream.requests)
    store = RunStore(db)
    (run,) = store.list_runs()
    assert run.kind == "proxy"
    events = store.events(run.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # each request added only its new events
    actions = [e.action for e in events if e.type == "guard_verdict"]  # type: ignore[attr-defined]
    assert actions == ["allowed", "cached", "nudged", "narrowed", "stopped"]  # "cached": the client still runs it
    assert sum(1 for e in events if e.type == "run_started") == 1
    # the proxied conversation becomes a regression case, and the guard passes it
    case = tmp_path / "proxied.yaml"
    imported = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "eval-import", run.id, "--db", str(db), "--out", str(case)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    data = yaml.safe_load(case.read_text())
    # The import default expects fewer calls than an unguarded recording; this one was guarded
    # already, so the replay must make the proxy's own decision, no more calls than it made.
    data["expect"] = {"expected_stop_reason": "repeated_call", "max_model_calls": proxied_calls + 1}
    case.write_text(yaml.safe_dump(data))
    evaluated = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "eval", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "1/1 cases passed" in evaluated.stdout


def test_the_key_goes_upstream_and_nowhere_else(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "proxy.db"
    respond = honouring_tool_choice({"name": "read_file", "arguments": {"path": "a.txt"}}, "done")
    with ScriptedServer(respond=respond) as upstream, caplog.at_level(logging.DEBUG):
        with proxy_in_front(upstream, db=db) as base:
            client_loop(base, "hello", lambda n, a: "")  # the ladder climbs: every decision is logged
        received = upstream.headers
    assert received and all(h.get("authorization") == "Bearer sk-client-key" for h in received)
    assert "sk-client-key" not in db.read_bytes().decode("utf-8", "replace")
    proxy_logs = [r for r in caplog.records if r.name.startswith("loopwarden")]
    assert any("narrowed" in r.getMessage() for r in proxy_logs)  # the decisions were logged...
    assert not any("sk-client-key" in r.getMessage() for r in proxy_logs)  # ...and the key never


@pytest.mark.parametrize(
    "options, stop_reason",
    [
        ({"rungs": (3, 0, 0), "max_tool_rounds": 6}, "tool_round_budget"),
        ({"max_model_calls": 3}, "model_call_budget"),
        ({"max_tokens": 400}, "token_budget"),
        ({"max_cost": 0.5, "price": (1000.0, 1000.0)}, "cost_budget"),
    ],
    ids=["rungs-off", "calls", "tokens", "cost"],
)
def test_rungs_and_budgets_are_the_proxys_options(tmp_path: Path, options: dict[str, Any], stop_reason: str) -> None:
    """Each budget ends a collapsing task on the wire as in process: past a hard budget (calls,
    tokens, cost) the client gets the stop message, past the tool rounds the model's own wrap-up
    answer; a rung switched off never fires."""
    db = tmp_path / "proxy.db"
    respond = honouring_tool_choice({"name": "read_file", "arguments": {"path": "a.txt"}}, "Here is what I found.")
    with ScriptedServer(respond=respond) as upstream, proxy_in_front(upstream, db=db, **options) as base:
        text, turns, _ = client_loop(base, "summarise a.txt", lambda n, a: "hello", tools=[READ_FILE])
        sent = upstream.requests
    assert len(sent) <= turns
    if stop_reason in HARD_BUDGET_REASONS:  # no call past the budget, not even a wrap-up
        assert text.startswith(f"[loopwarden stopped this task: {stop_reason}]") and len(sent) == turns - 1
    else:  # the wrap-up call's answer reached the client
        assert text == "Here is what I found." and sent[-1]["tool_choice"] == "none" and len(sent) == turns
    store = RunStore(db)
    (run,) = store.list_runs()
    events = [e.model_dump(mode="json") for e in store.events(run.id)]
    assert [e["stop_reason"] for e in events if e["type"] == "run_finished"] == [stop_reason]
    actions = {e["action"] for e in events if e["type"] == "guard_verdict"}
    if options.get("rungs") == (3, 0, 0):
        assert "nudged" in actions and not actions & {"narrowed", "stopped"}
        assert turns == options["max_tool_rounds"] + 1
