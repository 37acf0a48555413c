"""What strict and small real servers need from the client, against a real 127.0.0.1 server
through the real SDK: the content shape of tool-call turns, request-validation errors that are
not retried, context-window budgeting, output caps, and every attempt counted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from loopwarden import Agent, LoopConfig, tool
from loopwarden.models.base import ClientNote, ModelError, ModelRequest
from loopwarden.models.budget import estimate_tokens
from loopwarden.models.config import EndpointConfig
from loopwarden.models.openai_compat import OpenAICompatModel
from openai_server import Reply, ScriptedServer, completion, error, reply, tool_call, usage

CONTENT_NULL_500 = (  # llama-cpp-python 0.3.36 answers with this, HTTP 500 (install path shortened)
    "7 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, 'ChatCompletionReque"
    "stSystemMessage', 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant', 'ctx': {'expecte"
    "d': \"'system'\"}}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, 'ChatCompletionRequestUs"
    "erMessage', 'role'), 'msg': \"Input should be 'user'\", 'input': 'assistant', 'ctx': {'expected': \"'us"
    "er'\"}}\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, 'ChatCompletionRequestAssistantMessa"
    "ge', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n  {'type': 'literal_error',"
    " 'loc': ('body', 'messages', 1, 'ChatCompletionRequestToolMessage', 'role'), 'msg': \"Input should be"
    " 'tool'\", 'input': 'assistant', 'ctx': {'expected': \"'tool'\"}}\n  {'type': 'missing', 'loc': ('body',"
    " 'messages', 1, 'ChatCompletionRequestToolMessage', 'tool_call_id'), 'msg': 'Field required', 'input"
    "': {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function', 'function'"
    ": {'name': 'read_file', 'arguments': '{}'}}]}}\n  {'type': 'literal_error', 'loc': ('body', 'messages"
    "', 1, 'ChatCompletionRequestFunctionMessage', 'role'), 'msg': \"Input should be 'function'\", 'input':"
    " 'assistant', 'ctx': {'expected': \"'function'\"}}\n  {'type': 'missing', 'loc': ('body', 'messages', 1"
    ", 'ChatCompletionRequestFunctionMessage', 'name'), 'msg': 'Field required', 'input': {'role': 'assis"
    "tant', 'content': None, 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'read_f"
    "ile', 'arguments': '{}'}}]}}\n\n  File \"site-packages/llama_cpp/serv"
    'er/app.py", line 376, in create_chat_completion\n    POST /v1/chat/completions'
)
ROLE_500 = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 0, 'typed-dict', 'role'), "
    "'msg': \"Input should be 'system'\", 'input': 'robot'}"
)
CONTEXT_400 = (
    "This model's maximum context length is 1024 tokens. However, you requested 1600 tokens "
    "(1500 in the messages, 100 in the completion). Please reduce the length of the messages or completion."
)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def model(server: ScriptedServer, notes: list[ClientNote] | None = None, **fields: Any) -> OpenAICompatModel:
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "cheap_model": "m",
        "main_model": "m",
        "timeout": 5.0,
        "max_retries": 3,
        "retry_base_delay": 0.01,
        "retry_max_delay": 0.05,
    }
    config = EndpointConfig(**(values | fields))
    return OpenAICompatModel(config, "cheap", on_notice=notes.append if notes is not None else None)


def tool_turn_history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "read a.txt"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "hello"},
    ]


def strict_server(body: dict[str, Any]) -> Reply:
    """Like llama-cpp-python: an assistant turn whose content is null is a 500 validation error."""
    for message in body["messages"]:
        if message["role"] == "assistant" and "content" in message and message["content"] is None:
            return error(500, CONTENT_NULL_500)
    return reply(completion("done"))


async def test_tool_call_turns_are_sent_with_empty_content_by_default(server: ScriptedServer) -> None:
    server.respond = strict_server
    answer = await model(server).complete(ModelRequest(messages=tool_turn_history()))
    assert answer.text == "done" and answer.attempts == 1
    assert server.requests[0]["messages"][1]["content"] == ""


@pytest.mark.parametrize(("shape", "expected"), [("omit", "absent"), ("null", None), ("empty", "")])
async def test_each_content_shape_is_sent_as_configured(server: ScriptedServer, shape: str, expected: Any) -> None:
    server.push(reply(completion("ok")))
    await model(server, tool_call_content=shape).complete(ModelRequest(messages=tool_turn_history()))
    sent = server.requests[0]["messages"][1]
    assert sent.get("content", "absent") == expected
    assert sent["tool_calls"][0]["id"] == "c1"


async def test_a_rejected_null_content_is_not_retried_but_sent_once_in_another_shape(server: ScriptedServer) -> None:
    server.respond = strict_server
    notes: list[ClientNote] = []
    client = model(server, notes, tool_call_content="null")
    answer = await client.complete(ModelRequest(messages=tool_turn_history()))
    assert answer.text == "done"
    assert len(server.requests) == 2  # the refusal, then the other shape: no backoff retries
    assert server.requests[1]["messages"][1]["content"] == ""
    assert [n.kind for n in notes] == ["compatibility"] and "messages[1].content" in notes[0].message
    assert answer.attempts == 2  # the refused request reached the server: it counts
    await client.complete(ModelRequest(messages=tool_turn_history()))
    assert server.requests[2]["messages"][1]["content"] == ""  # the shape stays switched


async def test_an_invalid_request_is_not_retried_and_names_the_field(server: ScriptedServer) -> None:
    server.respond = lambda body: error(500, ROLE_500)
    with pytest.raises(ModelError) as caught:
        await model(server).complete(ModelRequest(messages=tool_turn_history()))
    assert caught.value.kind == "invalid_request" and not caught.value.retryable
    assert caught.value.field == "messages[0].role"
    assert "messages[0].role" in caught.value.message and "Input should be" in caught.value.message
    assert len(server.requests) == 1 and caught.value.attempts == 1


async def test_an_ordinary_500_is_still_retried(server: ScriptedServer) -> None:
    server.push(error(500, "CUDA out of memory"), reply(completion("ok")))
    answer = await model(server).complete(ModelRequest(messages=[{"role": "user", "content": "x"}]))
    assert answer.text == "ok" and answer.attempts == 2 and len(server.requests) == 2


def long_history(n: int = 6, size: int = 3000) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You explore files."}]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        history += [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"file {i}: " + "x" * size},
        ]
    return [*history, {"role": "user", "content": "Now summarise."}]


async def test_a_context_length_refusal_is_shrunk_and_sent_once_more_never_the_same(server: ScriptedServer) -> None:
    server.push(error(400, CONTEXT_400), reply(completion("short enough", usage_=usage(900, 20))))
    notes: list[ClientNote] = []
    client = model(server, notes)
    answer = await client.complete(ModelRequest(messages=long_history(), max_tokens=100))
    assert answer.text == "short enough"
    first, second = server.requests
    assert len(json.dumps(second)) < len(json.dumps(first)) / 2
    assert second["messages"][0] == first["messages"][0]  # the system prompt is never clipped
    assert "characters clipped to fit" in json.dumps(second)
    assert client.learned_window == 1024  # read from the refusal
    assert [n.kind for n in notes] == ["context_length"]
    assert answer.attempts == 2


async def test_a_second_context_length_refusal_ends_the_call(server: ScriptedServer) -> None:
    server.respond = lambda body: error(400, CONTEXT_400)
    with pytest.raises(ModelError) as caught:
        await model(server).complete(ModelRequest(messages=long_history(), max_tokens=100))
    assert caught.value.kind == "context_length" and caught.value.attempts == 2
    assert len(server.requests) == 2
    assert server.requests[0] != server.requests[1]


async def test_a_configured_window_fits_the_request_before_it_is_sent(server: ScriptedServer) -> None:
    server.push(reply(completion("ok")))
    notes: list[ClientNote] = []
    await model(server, notes, context_window=2048).complete(ModelRequest(messages=long_history(), max_tokens=512))
    [sent] = server.requests
    assert sent["max_tokens"] <= 512
    assert len(json.dumps(sent["messages"])) < 2048 * 3
    assert sent["messages"][-1]["content"] == "Now summarise."  # the last message kept whole
    assert [n.kind for n in notes] == ["context_budget"]


def short_turns(n: int) -> list[dict[str, Any]]:
    """A tool loop's history of many short turns: no content long enough to clip."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You explore files."},
        {"role": "user", "content": "Read notes.txt and report the peak field."},
    ]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "n"}'}}
        history += [
            {"role": "assistant", "content": f"reading, turn {i}", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "notes.txt: peak field 12.4 mT at x = 3.0 mm."},
        ]
    return history


async def test_a_history_of_short_turns_longer_than_the_window_drops_its_oldest_turns(server: ScriptedServer) -> None:
    # A repeating model's history: clipping cannot shorten it, so without dropping turns the request
    # went out longer than the window, and the refusal ended the run with model_error.
    server.push(reply(completion("ok")))
    notes: list[ClientNote] = []
    history = short_turns(80)
    await model(server, notes, context_window=1024).complete(ModelRequest(messages=history, max_tokens=256))
    [sent] = server.requests
    kept = sent["messages"]
    assert kept[:2] == history[:2] and kept[-2:] == history[-2:]  # system, task and the latest turn
    assert 4 < len(kept) < len(history)
    assert estimate_tokens(kept) + 256 <= 1024  # what was sent fits, by the client's (high) estimate
    called = {c["id"] for m in kept if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    assert all(m["tool_call_id"] in called for m in kept if m["role"] == "tool")  # no result without its call
    assert [n.kind for n in notes] == ["context_budget"] and "oldest messages" in notes[0].message


async def test_the_output_cap_is_lowered_to_what_the_window_leaves(server: ScriptedServer) -> None:
    server.push(reply(completion("ok")))
    messages = [{"role": "user", "content": "y" * 3000}]  # about 1000 tokens
    await model(server, context_window=2048).complete(ModelRequest(messages=messages, max_tokens=4000))
    assert 256 <= server.requests[0]["max_tokens"] <= 1000


async def test_after_a_timeout_the_retry_is_single_and_shorter(server: ScriptedServer) -> None:
    server.push(Reply(hang=True), Reply(hang=True), reply(completion("never asked")))
    notes: list[ClientNote] = []
    with pytest.raises(ModelError) as caught:
        await model(server, notes, timeout=0.5).complete(ModelRequest(messages=[{"role": "user", "content": "x"}]))
    assert caught.value.kind == "timeout"
    assert caught.value.attempts == 2  # both reached the server and count
    assert caught.value.usage.prompt_tokens > 0  # the server read the prompt: estimated, priced
    retries = [n for n in notes if n.kind == "retry"]
    assert len(retries) == 1 and "at most 1024 tokens" in retries[0].message


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool(terminal=True)
def finish(summary: str) -> str:
    """Finish."""
    return summary


async def test_every_attempt_that_reached_the_server_is_a_model_call_in_the_totals(server: ScriptedServer) -> None:
    server.push(
        error(503, "busy"),
        reply(completion(None, [tool_call("read_file", {"path": "a.txt"})], usage_=usage(100, 10))),
        reply(completion(None, [tool_call("finish", {"summary": "done"})], usage_=usage(120, 10))),
    )
    result = await Agent(model(server), [read_file, finish], config=LoopConfig()).run("go")
    assert result.stop_reason == "terminal_tool"
    assert result.totals.model_calls == 3 == len(server.requests)
    assert result.totals.prompt_tokens == 220


async def test_a_failed_call_still_counts_its_attempts(server: ScriptedServer) -> None:
    server.respond = lambda body: error(500, ROLE_500)
    result = await Agent(model(server), [read_file, finish], config=LoopConfig()).run("go")
    assert result.stop_reason == "model_error"
    assert result.totals.model_calls == 1
    [failed] = [e for e in result.events if e.type == "model_failed"]
    assert failed.model_dump()["attempts"] == 1 and failed.model_dump()["kind"] == "invalid_request"


async def test_arguments_with_raw_newlines_are_repaired_and_the_event_says_so(server: ScriptedServer) -> None:
    broken = '{"path": "notes\nREADME.md"}<|im_end|>'
    server.push(
        reply(completion(None, [tool_call("read_file", broken)])),
        reply(completion(None, [tool_call("finish", {"summary": "done"})])),
    )
    result = await Agent(model(server), [read_file, finish]).run("go")
    [proposed, _] = [e for e in result.events if e.type == "tool_call_proposed"]
    data = proposed.model_dump()
    assert data["arguments"] == {"path": "notes\nREADME.md"}
    assert "control characters" in data["repaired"] and "chat-template tokens" in data["repaired"]
    [ran] = [e for e in result.events if e.type == "tool_call_finished" and e.model_dump()["tool"] == "read_file"]
    assert ran.model_dump()["ok"]


async def test_an_empty_reply_is_asked_again_with_a_reminder_not_the_same_request(server: ScriptedServer) -> None:
    server.push(reply(completion("")), reply(completion("12.4 mT")))
    request = ModelRequest(messages=[{"role": "user", "content": "peak?"}], tools=[{"type": "function", "function": {
        "name": "read_file", "parameters": {"type": "object", "properties": {}}}}])  # fmt: skip
    answer = await model(server).complete(request)
    assert answer.text == "12.4 mT" and answer.attempts == 2
    first, second = server.requests
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1]["role"] == "user" and "empty" in second["messages"][-1]["content"]
    assert request.messages == [{"role": "user", "content": "peak?"}]  # the caller's history is untouched


async def test_a_long_run_of_short_turns_is_not_ended_by_the_context_window(server: ScriptedServer) -> None:
    # A server with a 1024-token window (as llama.cpp's n_ctx) and a model that reads a new file every
    # turn: the history outgrows the window by the eighth turn or so. The runtime knows the window, so
    # each request is fitted before it is sent; before, the too-long request was refused twice and the
    # run ended with model_error.
    window = 1024

    def respond(body: dict[str, Any]) -> Reply:
        if estimate_tokens(body["messages"], body.get("tools")) + (body.get("max_tokens") or 0) > window:
            return error(400, f"Requested tokens exceed context window of {window}")
        turn = len(server.requests)
        if turn > 16:
            return reply(completion(None, [tool_call("finish", {"summary": "all parts read"})]))
        return reply(completion(f"reading part {turn}", [tool_call("read_file", {"path": f"part-{turn}.txt"})]))

    server.respond = respond
    result = await Agent(model(server, context_window=window), [read_file, finish]).run("Read every part.")
    assert result.stop_reason == "terminal_tool", [e.model_dump() for e in result.events if e.type == "model_failed"]
    assert result.output == "all parts read" and result.totals.model_calls == len(server.requests) == 17
