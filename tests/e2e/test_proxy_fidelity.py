"""Streaming fidelity: whatever sequence of events the upstream sends, the client receives the same
bytes through the proxy when no rung fires (the first turn of a conversation: nothing to repeat)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openai_server import Reply, ScriptedServer
from proxykit import proxy_in_front
from server_jobs import HTTP  # one client: httpx.post built an SSL context per call (67 ms of CPU)

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
extra_fields = st.dictionaries(
    st.sampled_from(["logprobs", "x_vendor", "system_fingerprint", "obfuscation"]), text, max_size=2
)


@st.composite
def chunk(draw: st.DrawFn, call_ids: list[str]) -> dict[str, Any] | str:
    kind = draw(st.sampled_from(["content", "reasoning", "tool", "usage", "raw"]))
    base: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    base |= draw(extra_fields)
    if kind == "raw":  # comments, CRLF line ends, multi-line data, event names
        return draw(
            st.sampled_from([": keep-alive\n\n", ": ping\r\n\r\n", "event: ping\ndata: {}\n\n", "retry: 100\n\n"])
        )
    if kind == "usage":
        return base | {
            "choices": [],
            "usage": {"prompt_tokens": draw(st.integers(0, 9)), "completion_tokens": 1, "total_tokens": 2},
        }
    if kind == "tool":
        index = draw(st.integers(0, len(call_ids) - 1))
        part: dict[str, Any] = {"index": index, "function": {"arguments": draw(text)}}
        if draw(st.booleans()):
            part |= {"id": call_ids[index], "type": "function", "function": {"name": f"tool_{index}", "arguments": ""}}
        return base | {"choices": [{"index": 0, "delta": {"tool_calls": [part]}, "finish_reason": None}]}
    field = "content" if kind == "content" else "reasoning_content"
    return base | {"choices": [{"index": 0, "delta": {field: draw(text)}, "finish_reason": None}]}


streams = st.integers(1, 3).flatmap(
    lambda n: st.tuples(st.lists(chunk([f"call_{i}" for i in range(n)]), min_size=1, max_size=12), st.booleans())
)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScriptedServer, str]]:
    with ScriptedServer() as upstream, proxy_in_front(upstream) as base:
        yield upstream, base


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(script=streams)
def test_any_stream_reaches_the_client_byte_for_byte(
    servers: tuple[ScriptedServer, str], script: tuple[list[Any], bool]
) -> None:
    upstream, base = servers
    chunks, done = script
    tools = [
        {"type": "function", "function": {"name": f"tool_{i}", "parameters": {"type": "object"}}} for i in range(3)
    ]
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": json.dumps(chunks)[:40]}],
        "tools": tools,
        "stream": True,
    }
    upstream.push(Reply(chunks=chunks, done=done), Reply(chunks=chunks, done=done))
    direct = HTTP.post(f"{upstream.base_url}/chat/completions", json=body).content
    proxied = HTTP.post(f"{base}/chat/completions", json=body).content
    assert proxied == direct


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(reasoning=text, top=extra_fields, in_message=extra_fields, calls=st.integers(0, 2))
def test_any_json_reply_reaches_the_client_with_every_field(
    servers: tuple[ScriptedServer, str], reasoning: str, top: dict[str, str], in_message: dict[str, str], calls: int
) -> None:
    """A JSON reply the guard lets through keeps reasoning and unknown fields, at every level."""
    upstream, base = servers
    message: dict[str, Any] = {"role": "assistant", "content": "ok", "reasoning_content": reasoning, **in_message}
    if calls:
        message["tool_calls"] = [
            {"id": f"c{i}", "type": "function", "function": {"name": f"tool_{i}", "arguments": "{}"}}
            for i in range(calls)
        ]
    completion = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 1}},
        **top,
    }
    body = {"model": "m", "messages": [{"role": "user", "content": reasoning + json.dumps(top)}]}
    upstream.push(Reply(body=completion))
    assert HTTP.post(f"{base}/chat/completions", json=body).json() == completion
