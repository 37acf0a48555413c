"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1, through the real SDK."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from loopwarden.models.base import ClientNote, ModelError, ModelRequest
from loopwarden.models.config import EndpointConfig
from loopwarden.models.openai_compat import OpenAICompatModel, build_model, tls_context
from openai_server import Reply, ScriptedServer, completion, error, reply, stream, tool_call, usage

KEY = "sk-test-secret-0123456789abcdef"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def endpoint(server: ScriptedServer, **fields: Any) -> EndpointConfig:
    values: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": KEY,
        "cheap_model": "test-model",
        "main_model": "test-main",
        "timeout": 5.0,
        "max_retries": 3,
        "retry_base_delay": 0.01,
        "retry_max_delay": 2.0,
    }
    return EndpointConfig(**(values | fields))


def client(server: ScriptedServer, notices: list[ClientNote] | None = None, **fields: Any) -> OpenAICompatModel:
    model = build_model(endpoint(server, **fields), "cheap", on_notice=notices.append if notices is not None else None)
    assert isinstance(model, OpenAICompatModel)
    return model


def ask(text: str = "hi", **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}], **fields)


# -- plain replies, tools, tiers -----------------------------------------------------------------


async def test_text_reply_with_usage_and_the_key_sent_as_bearer(server: ScriptedServer) -> None:
    server.push(reply(completion("Hello.", usage_=usage(30, 4))))
    answer = await client(server).complete(ask())
    assert answer.text == "Hello."
    assert answer.tool_calls == []
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (30, 4)
    assert answer.model == "test-model"
    assert server.requests[0]["model"] == "test-model"
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in server.requests[0]
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"


async def test_each_tier_sends_its_own_model_name(server: ScriptedServer) -> None:
    server.push(reply(completion("a")), reply(completion("b")))
    await build_model(endpoint(server), "cheap").complete(ask())
    await build_model(endpoint(server), "main").complete(ask())
    assert [r["model"] for r in server.requests] == ["test-model", "test-main"]


@pytest.mark.parametrize(
    "choice",
    ["auto", "none", "required", {"type": "function", "function": {"name": "read_file"}}],
)
async def test_tools_and_tool_choice_are_sent(server: ScriptedServer, choice: Any) -> None:
    server.push(reply(completion("ok")))
    await client(server).complete(ask(tools=TOOLS, tool_choice=choice))
    assert server.requests[0]["tools"] == TOOLS
    assert server.requests[0]["tool_choice"] == choice


async def test_parallel_tool_calls_in_one_reply(server: ScriptedServer) -> None:
    calls = [tool_call("read_file", {"path": "a.txt"}, "c1"), tool_call("read_file", {"path": "b.txt"}, "c2")]
    server.push(reply(completion(None, calls)))
    answer = await client(server).complete(ask(tools=TOOLS))
    assert [(c.id, c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [
        ("c1", "read_file", {"path": "a.txt"}),
        ("c2", "read_file", {"path": "b.txt"}),
    ]
    assert answer.finish_reason == "tool_calls"


async def test_extra_body_reaches_the_server(server: ScriptedServer) -> None:
    server.push(reply(completion("ok")))
    await client(server, extra_body={"thinking": {"type": "disabled"}}).complete(ask())
    assert server.requests[0]["thinking"] == {"type": "disabled"}


# -- streaming -------------------------------------------------------------------------------------


async def test_stream_assembles_tool_call_deltas_split_across_chunks(server: ScriptedServer) -> None:
    calls = [
        tool_call("read_file", {"path": "notes/a long file name.txt"}, "c1"),
        tool_call("read_file", {"path": "b.txt"}, "c2"),
    ]
    server.push(stream("Reading.", calls, pieces=4, usage_=usage(50, 9, cached=20)))
    answer = await client(server, stream=True).complete(ask(tools=TOOLS))
    assert answer.text == "Reading."
    assert [(c.id, json.loads(c.arguments)) for c in answer.tool_calls] == [
        ("c1", {"path": "notes/a long file name.txt"}),
        ("c2", {"path": "b.txt"}),
    ]
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.cached_tokens) == (50, 9, 20)
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}


async def test_stream_with_whole_calls_reusing_index_zero(server: ScriptedServer) -> None:
    # Some local servers send every call complete, each under index 0.
    base = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "test-model"}
    chunks: list[dict[str, Any] | str] = [
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **c}]}, "finish_reason": None}]}
        for c in (tool_call("read_file", {"path": "a"}, "k1"), tool_call("read_file", {"path": "b"}, "k2"))
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    server.push(Reply(chunks=chunks))
    answer = await client(server, stream=True).complete(ask(tools=TOOLS))
    assert [(c.id, json.loads(c.arguments)) for c in answer.tool_calls] == [
        ("k1", {"path": "a"}),
        ("k2", {"path": "b"}),
    ]


async def test_stream_keeps_reasoning_out_of_the_text(server: ScriptedServer) -> None:
    server.push(stream("The answer is 4.", reasoning="2+2... carry nothing... 4", pieces=3))
    answer = await client(server, stream=True).complete(ask())
    assert answer.text == "The answer is 4."
    assert answer.reasoning == "2+2... carry nothing... 4"


# -- faults ----------------------------------------------------------------------------------------


async def test_429_honours_retry_after_then_succeeds(server: ScriptedServer) -> None:
    notices: list[ClientNote] = []
    server.push(error(429, "Rate limit reached", retry_after="0.4"), reply(completion("done")))
    began = time.monotonic()
    answer = await client(server, notices).complete(ask())
    assert answer.text == "done"
    assert len(server.requests) == 2
    assert [(n.kind, n.status, n.delay) for n in notices] == [("retry", 429, 0.4)]
    assert answer.notes == notices  # the reply carries them into its model_call event
    assert time.monotonic() - began >= 0.4  # it really waited what the server asked


async def test_retry_after_is_capped(server: ScriptedServer) -> None:
    notices: list[ClientNote] = []
    server.push(error(429, "slow down", retry_after="3600"), reply(completion("done")))
    await client(server, notices, retry_max_delay=0.2).complete(ask())
    assert notices[0].delay == 0.2


async def test_retry_after_ms_header_is_understood(server: ScriptedServer) -> None:
    notices: list[ClientNote] = []
    server.push(Reply(status=429, body={"error": {"message": "x"}}, headers={"retry-after-ms": "150"}))
    server.push(reply(completion("done")))
    await client(server, notices).complete(ask())
    assert notices[0].delay == pytest.approx(0.15)


async def test_500_twice_then_success(server: ScriptedServer) -> None:
    notices: list[ClientNote] = []
    server.push(error(500, "boom"), error(503, "overloaded"), reply(completion("finally")))
    answer = await client(server, notices).complete(ask())
    assert answer.text == "finally"
    assert len(server.requests) == 3
    assert [n.status for n in notices] == [500, 503]


async def test_persistent_5xx_gives_up_after_the_cap(server: ScriptedServer) -> None:
    server.push(*[error(502, "bad gateway") for _ in range(10)])
    with pytest.raises(ModelError) as caught:
        await client(server, max_retries=2).complete(ask())
    assert caught.value.kind == "server_error"
    assert caught.value.retryable and caught.value.status == 502
    assert "after 3 attempts" in caught.value.message
    assert len(server.requests) == 3


async def test_a_hung_response_hits_the_timeout(server: ScriptedServer) -> None:
    server.push(Reply(hang=True), Reply(hang=True))
    began = time.monotonic()
    with pytest.raises(ModelError) as caught:
        # Long enough for a loaded machine's server thread to read each request before it is given up.
        await client(server, timeout=2.0, max_retries=1).complete(ask())
    assert caught.value.kind == "timeout"
    assert len(server.requests) == 2
    assert time.monotonic() - began < 10  # it did not wait for the server to give up


async def test_a_stream_that_stops_mid_way_hits_the_timeout_then_retries(server: ScriptedServer) -> None:
    hung = stream("never finished", pieces=3)
    hung.hang_after_chunks = True
    server.push(hung, stream("complete"))
    # After a timeout there is one retry only: give a loaded machine room to stream the second one.
    answer = await client(server, stream=True, timeout=3.0).complete(ask())
    assert answer.text == "complete"
    assert len(server.requests) == 2


async def test_a_slow_but_live_stream_is_not_cut(server: ScriptedServer) -> None:
    # ~9 chunks 0.5 s apart: the whole stream takes longer than the timeout, no gap does (a gap
    # may stretch fourfold on a loaded machine: a 0.4 s timeout over 0.1 s gaps failed once).
    server.push(stream("slow but sure, and alive", pieces=6, chunk_delay=0.5))
    answer = await client(server, stream=True, timeout=2.0, max_retries=0).complete(ask())
    assert answer.text == "slow but sure, and alive"


async def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    config = EndpointConfig(
        base_url=f"http://127.0.0.1:{port}/v1", cheap_model="m", main_model="m", max_retries=1, retry_base_delay=0.01
    )
    with pytest.raises(ModelError) as caught:
        await OpenAICompatModel(config).complete(ask())
    assert caught.value.kind == "connection"
    assert "check the base URL" in caught.value.message


async def test_every_client_of_the_process_shares_one_tls_context() -> None:
    """TLS settings load the whole CA bundle (about 50 ms of CPU): read once per process, not again
    for each client (one is built per model and per event loop)."""
    config = EndpointConfig(base_url="https://models.example/v1", cheap_model="m", main_model="m")
    first, second = OpenAICompatModel(config)._sdk(), OpenAICompatModel(config)._sdk()
    try:
        assert first is not second
        used = {id(sdk._client._transport._pool._ssl_context) for sdk in (first, second)}  # type: ignore[attr-defined]
        assert used == {id(tls_context())}
        assert tls_context().verify_mode.name == "CERT_REQUIRED" and tls_context().check_hostname
    finally:
        await first.close()
        await second.close()


@pytest.mark.parametrize(
    ("status", "message", "kind", "hint"),
    [
        (401, "Authentication Fails, Your api key: sk-test-secret-0123456789abcdef is invalid", "auth", "API key"),
        (403, "forbidden", "auth", "LOOPWARDEN_API_KEY"),
        (404, "The model `test-model` does not exist", "model_not_found", "'test-model' does not exist"),
        (400, "This model's maximum context length is 65536 tokens", "context_length", "longer context"),
        (400, "Invalid 'messages': bad role", "bad_request", "refused the request"),
        (402, "Insufficient Balance", "billing", "top it up"),
    ],
)
async def test_client_errors_are_not_retried_and_say_what_to_do(
    server: ScriptedServer, status: int, message: str, kind: str, hint: str
) -> None:
    server.push(error(status, message), reply(completion("never reached")))
    with pytest.raises(ModelError) as caught:
        await client(server).complete(ask())
    assert (caught.value.kind, caught.value.status, caught.value.retryable) == (kind, status, False)
    assert hint in caught.value.message
    assert KEY not in caught.value.message and KEY not in str(caught.value)
    assert len(server.requests) == 1


async def test_an_unreadable_200_body_is_retried(server: ScriptedServer) -> None:
    server.push(Reply(body="<html>gateway hiccup</html>"), reply(completion("ok")))
    answer = await client(server).complete(ask())
    assert answer.text == "ok"
    assert len(server.requests) == 2


async def test_an_empty_reply_is_asked_again_once_and_both_are_counted(server: ScriptedServer) -> None:
    notices: list[ClientNote] = []
    server.push(reply(completion("", usage_=usage(10, 0))), reply(completion("second time", usage_=usage(12, 3))))
    answer = await client(server, notices).complete(ask())
    assert answer.text == "second time"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (22, 3)
    assert [n.kind for n in notices] == ["empty_reply"]


async def test_two_empty_replies_are_reported(server: ScriptedServer) -> None:
    server.push(reply(completion(None)), reply(completion("   ")), reply(completion("not asked")))
    with pytest.raises(ModelError) as caught:
        await client(server).complete(ask())
    assert caught.value.kind == "empty_reply"
    assert len(server.requests) == 2


# -- DeepSeek specifics ------------------------------------------------------------------------------


DSML = (
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read_file">\n'
    '<｜DSML｜parameter name="path" string="true">a.txt</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    "</｜DSML｜function_calls>"
)


async def test_dsml_in_content_becomes_a_tool_call(server: ScriptedServer) -> None:
    notices: list[ClientNote] = []
    server.push(reply(completion("I will read it.\n" + DSML)))
    answer = await client(server, notices).complete(ask(tools=TOOLS))
    assert answer.text == "I will read it."
    assert [(c.name, json.loads(c.arguments)) for c in answer.tool_calls] == [("read_file", {"path": "a.txt"})]
    assert [n.kind for n in notices] == ["leaked_markup"]


async def test_dsml_split_across_stream_chunks_is_recovered(server: ScriptedServer) -> None:
    server.push(stream(DSML, pieces=7))
    answer = await client(server, stream=True).complete(ask(tools=TOOLS))
    assert answer.text is None
    assert [c.name for c in answer.tool_calls] == ["read_file"]


async def test_unreadable_markup_twice_is_a_malformed_reply(server: ScriptedServer) -> None:
    server.push(reply(completion("<｜DSML｜function_calls> ...")), reply(completion("<|DSML|tool_calls")))
    with pytest.raises(ModelError) as caught:
        await client(server).complete(ask(tools=TOOLS))
    assert caught.value.kind == "malformed_reply"


async def test_reasoning_is_echoed_on_tool_turns_only_for_deepseek(server: ScriptedServer) -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "thought about q1"},
        {"role": "user", "content": "q2"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "I need the file",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "text"},
    ]
    server.push(reply(completion("x")), reply(completion("y")))
    await client(server, reasoning_echo=True).complete(ModelRequest(messages=history, tools=TOOLS))
    await client(server, reasoning_echo=False).complete(ModelRequest(messages=history, tools=TOOLS))
    deepseek, other = (r["messages"] for r in server.requests)
    assert "reasoning_content" not in deepseek[1]  # a turn without tool calls: not sent
    assert deepseek[3]["reasoning_content"] == "I need the file"  # a tool-call turn: must be sent
    assert all("reasoning_content" not in m for m in other)


async def test_deepseek_reasoning_round_trip_through_assistant_message(server: ScriptedServer) -> None:
    server.push(
        reply(completion(None, [tool_call("read_file", {"path": "a"}, "c1")], reasoning="plan: read a")),
        reply(completion("done")),
    )
    model = client(server, reasoning_echo=True)
    first = await model.complete(ask(tools=TOOLS))
    assert first.reasoning == "plan: read a" and first.text is None
    messages = [{"role": "user", "content": "hi"}, first.assistant_message()]
    messages.append({"role": "tool", "tool_call_id": "c1", "content": "A"})
    await model.complete(ModelRequest(messages=messages, tools=TOOLS))
    assert server.requests[1]["messages"][1]["reasoning_content"] == "plan: read a"


async def test_think_blocks_in_content_are_moved_to_reasoning(server: ScriptedServer) -> None:
    server.push(reply(completion("<think>hmm, the user wants a number</think>\n\n42")))
    answer = await client(server).complete(ask())
    assert answer.text == "42"
    assert answer.reasoning == "hmm, the user wants a number"


@pytest.mark.parametrize("style", ["deepseek", "openai"])
async def test_cached_tokens_in_either_provider_style(server: ScriptedServer, style: str) -> None:
    server.push(reply(completion("ok", usage_=usage(100, 10, cached=64, style=style))))
    answer = await client(server).complete(ask())
    assert answer.usage.cached_tokens == 64


async def test_malformed_tool_arguments_pass_through_and_are_sanitised_in_history(server: ScriptedServer) -> None:
    broken = '{"path": "a.txt"'
    server.push(reply(completion(None, [tool_call("read_file", broken, "c1")])), reply(completion("ok")))
    model = client(server)
    first = await model.complete(ask(tools=TOOLS))
    assert first.tool_calls[0].arguments == broken  # the runtime judges it and tells the model
    messages = [{"role": "user", "content": "hi"}, first.assistant_message()]
    messages.append({"role": "tool", "tool_call_id": "c1", "content": '{"ok": false}'})
    await model.complete(ModelRequest(messages=messages, tools=TOOLS))
    sent = server.requests[1]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"_unparsed_arguments": broken}


def test_repr_never_shows_the_key(server: ScriptedServer) -> None:
    model = client(server)
    assert KEY not in repr(model)
    assert KEY not in repr(model.config)


def test_one_model_object_serves_several_event_loops(server: ScriptedServer) -> None:
    # Agent.run_sync twice means two event loops; the SDK's connection pool belongs to one.
    server.push(reply(completion("one")), reply(completion("two")))
    model = client(server)
    answers = [asyncio.run(model.complete(ask())).text for _ in range(2)]
    assert answers == ["one", "two"]


async def test_a_stream_cut_before_its_finish_is_retried_not_taken_as_whole(server: ScriptedServer) -> None:
    cut = stream("half of the ans", pieces=3)
    assert cut.chunks is not None
    cut.chunks, cut.done = cut.chunks[:3], False  # the connection closes before finish_reason and [DONE]
    server.push(cut, stream("the whole answer"))
    answer = await client(server, stream=True).complete(ask())
    assert answer.text == "the whole answer"
    assert len(server.requests) == 2


async def test_an_empty_reply_cut_at_the_token_limit_says_so(server: ScriptedServer) -> None:
    server.push(*[reply(completion("", reasoning="long thought", finish_reason="length")) for _ in range(2)])
    with pytest.raises(ModelError) as caught:
        await client(server).complete(ask())
    assert caught.value.kind == "empty_reply"
    assert "max_tokens" in caught.value.message


async def test_retry_notes_never_carry_the_key(server: ScriptedServer) -> None:
    server.push(error(429, f"key {KEY} is over its limit", retry_after="0"), reply(completion("ok")))
    answer = await client(server).complete(ask())
    assert [n.kind for n in answer.notes] == ["retry"]
    assert KEY not in answer.model_dump_json()
    assert "429" in answer.notes[0].message


async def test_logs_never_carry_the_key(server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")  # the SDK's own debug logging included
    server.push(error(503, f"upstream rejected {KEY}"), error(401, f"Incorrect API key provided: {KEY}"))
    with pytest.raises(ModelError):
        await client(server).complete(ask())
    assert "retry 1 of 3" in caplog.text  # the retry was logged...
    assert KEY not in caplog.text  # ...without the key
