"""The guarded loop driving the real OpenAI SDK against a real HTTP server on 127.0.0.1.

The server plays the LLM: a small function of the request decides each reply, so every turn
depends on what the runtime actually sent (tool results, ids, reasoning)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from loopwarden import Agent, Budgets, LoopConfig, Price, tool
from loopwarden.events import ModelCalled, ModelFailed, RunFinished, ToolCallFinished
from loopwarden.models.config import EndpointConfig, load_endpoint_config
from loopwarden.models.openai_compat import build_model
from openai_server import Reply, ScriptedServer, completion, error, reply, stream, tool_call, usage

NOTES = {"a.txt": "flow rose linearly with speed", "b.txt": "peak flow 12.4 L/min"}


@tool
def read_file(path: str) -> str:
    """Read a note.

    Args:
        path: the file name, e.g. a.txt
    """
    return NOTES[path]


def researcher(*, streaming: bool, reasoning: str | None = None) -> Any:
    """Turn 1: read both notes in parallel. Turn 2: answer from what the tool messages say."""

    def respond(body: dict[str, Any]) -> Reply:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if not results:
            calls = [tool_call("read_file", {"path": p}, f"call_{p}") for p in sorted(NOTES)]
            return (
                stream(None, calls, reasoning=reasoning, usage_=usage(100, 20, cached=40))
                if streaming
                else reply(completion(None, calls, reasoning=reasoning, usage_=usage(100, 20, cached=40)))
            )
        answer = "Findings: " + " | ".join(json.loads(r)["data"] for r in results)
        return stream(answer, usage_=usage(300, 30)) if streaming else reply(completion(answer, usage_=usage(300, 30)))

    return respond


def config_for(server: ScriptedServer, **fields: Any) -> EndpointConfig:
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": "sk-e2e-key-0123456789",
        "cheap_model": "test-model",
        "main_model": "test-main",
        "timeout": 5.0,
        "max_retries": 2,
        "retry_base_delay": 0.01,
    }
    return EndpointConfig(**(values | fields))


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
async def test_multi_turn_tool_loop_end_to_end(server: ScriptedServer, streaming: bool) -> None:
    server.respond = researcher(streaming=streaming)
    budgets = Budgets(prices={"test-model": Price(input=1.0, output=2.0, cached_input=0.1)})
    agent = Agent(build_model(config_for(server, stream=streaming)), [read_file], config=LoopConfig(budgets=budgets))
    result = await agent.run("What do the notes say?")

    assert result.status == "completed" and result.stop_reason == "final_answer"
    assert result.output == "Findings: flow rose linearly with speed | peak flow 12.4 L/min"
    tool_events = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert [(e.call_id, e.ok) for e in tool_events] == [("call_a.txt", True), ("call_b.txt", True)]
    # The second request carried the assistant's calls and one tool message per call id.
    second = server.requests[1]["messages"]
    assert [c["id"] for c in second[1]["tool_calls"]] == ["call_a.txt", "call_b.txt"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ["call_a.txt", "call_b.txt"]
    # Usage from the wire reached the totals, the events and the cost budget.
    t = result.totals
    assert (t.model_calls, t.prompt_tokens, t.completion_tokens, t.cached_tokens) == (2, 400, 50, 40)
    assert t.cost == pytest.approx((60 * 1.0 + 40 * 0.1 + 20 * 2.0 + 300 * 1.0 + 30 * 2.0) / 1e6)
    calls = [e for e in result.events if isinstance(e, ModelCalled)]
    assert [e.usage.prompt_tokens for e in calls] == [100, 300]
    assert all(e.model == "test-model" for e in calls)


async def test_the_token_budget_stops_on_reported_usage(server: ScriptedServer) -> None:
    server.respond = researcher(streaming=False)
    budgets = Budgets(max_tokens=100)
    agent = Agent(build_model(config_for(server)), [read_file], config=LoopConfig(budgets=budgets))
    result = await agent.run("What do the notes say?")
    assert result.stop_reason == "token_budget"
    assert len(server.requests) == 1  # 120 tokens used by the first call; no second call


async def test_429_then_500_mid_run_is_absorbed(server: ScriptedServer) -> None:
    respond = researcher(streaming=False)
    server.respond = respond
    server.push(error(429, "slow down", retry_after="0.05"), error(500, "oops"))
    agent = Agent(build_model(config_for(server)), [read_file])
    result = await agent.run("What do the notes say?")
    assert result.status == "completed"
    assert len(server.requests) == 4  # 429, 500, then the two real turns
    first = next(e for e in result.events if isinstance(e, ModelCalled))
    assert [(n.kind, n.status) for n in first.notes] == [("retry", 429), ("retry", 500)]
    assert first.notes[0].delay == 0.05  # the Retry-After the server sent


async def test_persistent_server_errors_end_the_run_with_a_model_error_event(server: ScriptedServer) -> None:
    server.respond = lambda body: error(503, "Server overloaded")
    agent = Agent(build_model(config_for(server)), [read_file])
    result = await agent.run("What do the notes say?")
    failed = [e for e in result.events if isinstance(e, ModelFailed)]
    assert len(failed) == 1
    assert failed[0].kind == "server_error" and failed[0].retryable
    assert "after 3 attempts" in failed[0].message
    assert failed[0].status == 503
    assert [n.status for n in failed[0].notes] == [503, 503]  # the two retries before giving up
    assert result.stop_reason == "model_error"
    assert isinstance(result.events[-1], RunFinished)


async def test_a_hung_endpoint_becomes_a_timeout_event(server: ScriptedServer) -> None:
    server.respond = lambda body: Reply(hang=True)
    agent = Agent(build_model(config_for(server, timeout=0.3, max_retries=1)), [read_file])
    result = await agent.run("What do the notes say?")
    failed = [e for e in result.events if isinstance(e, ModelFailed)]
    assert [f.kind for f in failed] == ["timeout"]
    assert result.stop_reason == "model_error"


async def test_a_bad_key_is_reported_once_without_the_key(server: ScriptedServer) -> None:
    server.respond = lambda body: error(401, "Incorrect API key provided: sk-e2e-key-0123456789")
    agent = Agent(build_model(config_for(server)), [read_file])
    result = await agent.run("hi")
    failed = [e for e in result.events if isinstance(e, ModelFailed)]
    assert [f.kind for f in failed] == ["auth"] and len(server.requests) == 1
    assert all("sk-e2e-key-0123456789" not in e.to_json() for e in result.events)


async def test_malformed_arguments_become_a_result_the_model_reads_and_fixes(server: ScriptedServer) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        tool_messages = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        if not tool_messages:
            return reply(completion(None, [tool_call("read_file", '{"path": "a.txt"', "bad")]))
        if len(tool_messages) == 1:
            assert tool_messages[0]["error_type"] == "invalid_arguments"  # what the model was told
            return reply(completion(None, [tool_call("read_file", {"path": "a.txt"}, "good")]))
        return reply(completion("a.txt says: " + tool_messages[-1]["data"]))

    server.respond = respond
    result = await Agent(build_model(config_for(server)), [read_file]).run("read a.txt")
    results = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert [(e.ok, e.error_type) for e in results] == [(False, "invalid_arguments"), (True, None)]
    assert result.output == "a.txt says: flow rose linearly with speed"
    assert result.status == "completed"


async def test_dsml_leaked_into_content_still_runs_the_tool(server: ScriptedServer) -> None:
    dsml = (
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read_file">\n'
        '<｜DSML｜parameter name="path" string="true">b.txt</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
        "</｜DSML｜function_calls>"
    )

    def respond(body: dict[str, Any]) -> Reply:
        results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
        return reply(completion("b.txt: " + results[0]["data"])) if results else reply(completion(dsml))

    server.respond = respond
    result = await Agent(build_model(config_for(server)), [read_file]).run("read b.txt")
    assert result.output == "b.txt: peak flow 12.4 L/min"
    assert "DSML" not in json.dumps([e.model_dump() for e in result.events], ensure_ascii=False)


async def test_deepseek_reasoning_goes_back_on_tool_turns_and_stays_out_of_the_output(server: ScriptedServer) -> None:
    server.respond = researcher(streaming=True, reasoning="I should read both notes first.")
    agent = Agent(build_model(config_for(server, stream=True, reasoning_echo=True)), [read_file])
    result = await agent.run("What do the notes say?")
    assistant = server.requests[1]["messages"][1]
    assert assistant["tool_calls"] and assistant["reasoning_content"] == "I should read both notes first."
    assert "read both notes first" not in str(result.output)


@pytest.mark.skipif(not os.environ.get("DEEPSEEK_API_KEY"), reason="needs DEEPSEEK_API_KEY (real endpoint)")
async def test_live_deepseek_tool_loop() -> None:
    config = load_endpoint_config(preset="deepseek")
    assert config is not None
    result = await Agent(build_model(config, "cheap"), [read_file]).run(
        "Read a.txt with the read_file tool and tell me what it says in one sentence."
    )
    assert result.status == "completed"
    assert "linear" in str(result.output).lower()
