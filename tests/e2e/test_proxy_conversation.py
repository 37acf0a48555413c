"""Budgets per conversation on the wire: a conversation of several tasks (a new user message each)
is capped as a whole, counted from the history the client sends, so the cap holds across a
restart of the proxy; the client gets the same stop message as for a task budget, naming the
conversation's budget. The real `openai` SDK against a real proxy and a scripted upstream."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from openai import OpenAI

from loopwarden.events import Totals
from loopwarden.guard.budget import Budgets
from loopwarden.proxy.conversation import ConversationLimits, spent_before, with_conversation
from loopwarden.proxy.settings import ProxyOptionError, build_settings
from openai_server import Reply, ScriptedServer, completion, reply, stream, tool_call
from proxykit import READ_FILE, proxy_in_front, wait_for_port
from proxykit import _streamed as streamed_turn
from server_jobs import free_port


def read_then_answer(streaming: bool = False) -> Any:
    """An upstream whose model reads a file for each new question, then answers from it (and
    answers at once when asked with `tool_choice: "none"`, as a real API does)."""

    def respond(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "user" and body.get("tool_choice") != "none":
            calls = [tool_call("read_file", {"path": f"q{len(body['messages'])}.txt"})]
            return stream(tool_calls=calls) if streaming else reply(completion(tool_calls=calls))
        return stream(text="the answer") if streaming else reply(completion(text="the answer"))

    return respond


def ask(base_url: str, messages: list[dict[str, Any]], question: str, *, result: str = "", stream: bool = False) -> str:
    """One task of the conversation: the question, the client running every tool call, until a
    reply without calls; `messages` grows as a coding agent's history does."""
    client = OpenAI(base_url=base_url, api_key="sk-client-key", max_retries=0)
    messages.append({"role": "user", "content": question})
    for _ in range(10):
        if stream:
            text, calls = streamed_turn(client, messages, [READ_FILE])
        else:
            message = client.chat.completions.create(model="m", messages=messages, tools=[READ_FILE]).choices[0].message  # type: ignore[arg-type]
            text = message.content or ""
            calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            entry["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
            ]
        messages.append(entry)
        if not calls:
            return text
        messages.extend({"role": "tool", "tool_call_id": i, "content": result or "file text"} for i, _, _ in calls)
    raise AssertionError("the task did not end within 10 turns")


def start_proxy(upstream: ScriptedServer, *options: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    command = [sys.executable, "-m", "loopwarden.cli", "proxy", "--upstream", upstream.base_url]
    command += ["--port", str(port), "--quiet", *options]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_port(port, process)
    return process, f"http://127.0.0.1:{port}/v1"


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.communicate(timeout=30)


def test_a_conversation_budget_holds_across_a_proxy_restart() -> None:
    """Two model calls a task, five for the conversation: the first two tasks pass untouched, the
    proxy restarts, and the third task gets its first call and then the conversation's stop,
    while its own per-task budget (three calls) is never reached."""
    options = ("--max-model-calls", "3", "--conversation-max-model-calls", "5")
    messages: list[dict[str, Any]] = []
    with ScriptedServer(respond=read_then_answer()) as upstream:
        process, base = start_proxy(upstream, *options)
        try:
            assert ask(base, messages, "what is in q1?") == "the answer"
            assert ask(base, messages, "and in q2?") == "the answer"
        finally:
            stop(process)
        assert len(upstream.requests) == 4
        process, base = start_proxy(upstream, *options)  # a fresh process: nothing remembered
        try:
            text = ask(base, messages, "and in q3?")
        finally:
            stop(process)
        assert len(upstream.requests) == 5  # nothing past the conversation's fifth call went upstream
    assert text.startswith("[loopwarden stopped this task: conversation_model_call_budget]")
    assert "5 of 5 model calls used over the conversation" in text


def test_without_a_conversation_budget_each_task_has_its_own() -> None:
    messages: list[dict[str, Any]] = []
    with ScriptedServer(respond=read_then_answer()) as upstream:
        with proxy_in_front(upstream, max_model_calls=3) as base:
            answers = [ask(base, messages, f"question {i}") for i in range(4)]
        assert len(upstream.requests) == 8
    assert answers == ["the answer"] * 4


@pytest.mark.parametrize(
    "limits, price, reason",
    [
        (ConversationLimits(max_tokens=2500), None, "conversation_token_budget"),
        (ConversationLimits(max_cost=2.5), (1000.0, 1000.0), "conversation_cost_budget"),
        (ConversationLimits(max_tool_rounds=2), None, "conversation_tool_round_budget"),
    ],
    ids=["tokens", "cost", "tool-rounds"],
)
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_each_conversation_budget_ends_a_later_task(
    limits: ConversationLimits, price: tuple[float, float] | None, reason: str, streaming: bool
) -> None:
    """Tokens and cost over the conversation, estimated from the history (a 4,000-character tool
    result is about 1,000 prompt tokens for every later turn): the first task passes untouched,
    a later one is stopped, hard budgets with the stop message and nothing more upstream, the tool
    rounds with the model's own wrap-up answer (`tool_choice: "none"`)."""
    messages: list[dict[str, Any]] = []
    options: dict[str, Any] = {"conversation": limits, "price": price}
    with ScriptedServer(respond=read_then_answer(streaming)) as upstream, proxy_in_front(upstream, **options) as base:
        answers = [ask(base, messages, f"question {i}", result="x" * 4000, stream=streaming) for i in range(4)]
        sent = list(upstream.requests)
    assert answers[0] == "the answer"
    stopped = [i for i, a in enumerate(answers) if a.startswith(f"[loopwarden stopped this task: {reason}]")]
    if reason == "conversation_tool_round_budget":
        # the second task's tool round is the conversation's second: from there on every call is a
        # wrap-up (tools declared, none callable), one per task, and the model's answer goes through
        assert answers == ["the answer"] * 4 and len(sent) == 6
        assert [r.get("tool_choice") for r in sent] == [None, None, None, "none", "none", "none"]
        return
    # two tasks of two calls pass (about 1,050 then 3,200 tokens estimated: past 2,500 after the
    # second); the third and fourth are stopped before their first call: nothing more upstream
    assert answers[:2] == ["the answer"] * 2 and stopped == [2, 3] and len(sent) == 4


def test_the_earlier_tasks_spend_is_read_from_the_history() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
    opening = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "y" * 4000},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "second"},
    ]
    spent = spent_before(opening)
    assert (spent.model_calls, spent.tool_rounds) == (2, 1)
    assert spent.prompt_tokens > 1000  # the answer's prompt held the 4,000-character result
    assert spent_before(opening, None).cost == 0 and spent_before(opening[:1]).model_calls == 0
    # the task's own budget is checked first, then the conversation's over both
    budgets = with_conversation(Budgets(max_model_calls=3), ConversationLimits(max_model_calls=4), spent)
    assert budgets.exhausted(Totals(model_calls=1), 0) is None
    assert budgets.exhausted(Totals(model_calls=2), 0) == (
        "conversation_model_call_budget",
        "conversation budget exhausted: 4 of 4 model calls used over the conversation",
    )
    assert (budgets.exhausted(Totals(model_calls=3), 0) or ("",))[0] == "model_call_budget"
    assert with_conversation(Budgets(), ConversationLimits(), spent) == Budgets()


def test_conversation_budget_options_are_checked() -> None:
    with pytest.raises(ProxyOptionError, match="--conversation-max-cost needs --price"):
        build_settings(upstream="http://127.0.0.1:1/v1", conversation=ConversationLimits(max_cost=1.0))
    with pytest.raises(ProxyOptionError, match="--conversation-max-tokens must be above 0"):
        build_settings(upstream="http://127.0.0.1:1/v1", conversation=ConversationLimits(max_tokens=0))
    with pytest.raises(ProxyOptionError, match="--max-tool-rounds must be 0 or more, not -3"):
        build_settings(upstream="http://127.0.0.1:1/v1", max_tool_rounds=-3)
    with pytest.raises(ProxyOptionError, match="--max-cost must be 0 or more"):
        build_settings(upstream="http://127.0.0.1:1/v1", max_cost=float("nan"), price=(1.0, 1.0))
