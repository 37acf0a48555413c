"""Reading a proxied request as a conversation, and mapping the guarded run's request back onto
the client's own messages."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models.base import ModelRequest
from loopwarden.proxy.history import BadRequest, conversation_id, read_conversation
from loopwarden.proxy.replay import forward_body, merge_messages
from loopwarden.proxy.upstream import sse_events


def turn(call_id: str, path: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "read", "arguments": f'{{"path": "{path}"}}'}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": f"text of {path}"},
    ]


def test_the_current_task_starts_after_the_last_user_message() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "first"}, *turn("a", "x")]
    messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "second"}, *turn("b", "y")]
    conversation = read_conversation({"messages": messages})
    assert conversation.opening == messages[:6] and conversation.task == messages[6:]
    assert [c.id for r in conversation.replies for c in r.tool_calls] == ["b"]
    assert conversation.take_result(0, "read", {"path": "y"}) == "text of y"
    assert conversation.take_result(0, "read", {"path": "y"}) is None  # each result answers one call


def test_a_conversation_keeps_its_id_as_it_grows_and_a_header_names_it() -> None:
    start = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    assert conversation_id(start) == conversation_id([*start, *turn("a", "x")])
    assert conversation_id(start) != conversation_id([{"role": "user", "content": "other"}])
    assert read_conversation({"messages": start}, "mine").id == "mine"


@pytest.mark.parametrize("messages", [None, [], "hi", [{"content": "no role"}]])
def test_unreadable_messages_are_a_bad_request(messages: Any) -> None:
    with pytest.raises(BadRequest):
        read_conversation({"messages": messages})


def test_injected_messages_land_where_the_run_put_them() -> None:
    client = [
        {"role": "user", "content": "q"},
        *turn("a", "x"),
        {"role": "system", "content": "client note"},
        *turn("b", "y"),
    ]
    conversation = read_conversation({"messages": client})
    nudge = {"role": "user", "content": "stop repeating"}
    run_view = [client[0], {"role": "assistant", "content": None}, {"role": "tool", "tool_call_id": "a"}, nudge]
    run_view += [{"role": "assistant", "content": None}, {"role": "tool", "tool_call_id": "b"}]
    merged = merge_messages(conversation, run_view)
    # the client's own note first, then the guard's nudge, then the next turn
    assert merged == [client[0], client[1], client[2], client[3], nudge, client[4], client[5]]


def test_the_run_shapes_tools_and_tool_choice_and_keeps_unknown_fields() -> None:
    tools = [
        {"type": "function", "function": {"name": "read", "parameters": {}}},
        {"type": "function", "function": {"name": "finish", "parameters": {}}},
        {"type": "web_search"},
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "tools": tools, "x_vendor": {"a": 1}}
    conversation = read_conversation(body)
    forced = {"type": "function", "function": {"name": "finish"}}
    request = ModelRequest(messages=body["messages"], tools=[tools[1]], tool_choice=forced)
    out = forward_body(body, conversation, request)
    assert out["tools"] == [tools[1], tools[2]] and out["tool_choice"] == forced and out["x_vendor"] == {"a": 1}
    untouched = forward_body(
        body, conversation, ModelRequest(messages=body["messages"], tools=tools[:2], tool_choice="auto")
    )
    assert untouched == body
    wrap_up = forward_body(body, conversation, ModelRequest(messages=body["messages"], tools=[]))
    assert wrap_up["tool_choice"] == "none" and wrap_up["tools"] == tools
    # a client that forces a tool the guard narrowed away: the request upstream stays consistent
    read = {"type": "function", "function": {"name": "read"}}
    forcing = {**body, "tool_choice": read}
    narrowed = forward_body(
        forcing, read_conversation(forcing), ModelRequest(messages=body["messages"], tools=[tools[1]])
    )
    assert narrowed["tools"] == [tools[1], tools[2]] and narrowed["tool_choice"] == "auto"
    kept = forward_body(forcing, read_conversation(forcing), ModelRequest(messages=body["messages"], tools=tools[:2]))
    assert kept == forcing


events = st.lists(
    st.tuples(
        st.text(
            alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), min_size=1, max_size=20
        ),
        st.sampled_from([b"\n\n", b"\r\n\r\n"]),
    ),
    max_size=10,
)


@given(events=events, cuts=st.lists(st.integers(1, 7), max_size=30))
def test_sse_events_are_split_with_their_bytes_unchanged(events: list[tuple[str, bytes]], cuts: list[int]) -> None:
    raw = [f"data: {text}".encode() + end for text, end in events]
    stream = b"".join(raw)
    pieces, at = [], 0
    for cut in cuts:
        pieces.append(stream[at : at + cut])
        at += cut
    pieces.append(stream[at:])

    async def split() -> list[bytes]:
        async def chunks() -> Any:
            for piece in pieces:
                yield piece

        return [event async for event in sse_events(chunks())]

    assert asyncio.run(split()) == raw
