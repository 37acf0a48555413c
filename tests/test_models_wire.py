"""The wire format on its own: stream assembly, usage styles, reasoning, history sent back."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models.base import ModelReply, ToolCall
from loopwarden.models.wire import (
    StreamAssembler,
    parse_completion,
    recover_leaked_calls,
    split_reasoning,
    to_wire_messages,
    usage_from,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(
    st.lists(st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4), min_size=1, max_size=3),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_split_of_argument_deltas_assembles_to_the_original_calls(
    argument_sets: list[dict[str, Any]], points: list[int]
) -> None:
    assembler = StreamAssembler(fallback_model="m")
    for index, arguments in enumerate(argument_sets):
        raw = json.dumps(arguments)
        first = {"index": index, "id": f"c{index}", "type": "function", "function": {"name": "t", "arguments": ""}}
        assembler.add(chunk({"tool_calls": [first]}))
        for piece in cut(raw, points):
            assembler.add(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    assembler.add(chunk({}, "tool_calls"))
    reply = assembler.reply()
    assert [json.loads(c.arguments) for c in reply.tool_calls] == argument_sets
    assert [c.id for c in reply.tool_calls] == [f"c{i}" for i in range(len(argument_sets))]
    assert reply.finish_reason == "tool_calls"


@given(st.text(max_size=200), st.lists(st.integers(min_value=0, max_value=200), max_size=10))
def test_any_split_of_text_deltas_assembles_to_the_text(text: str, points: list[int]) -> None:
    assembler = StreamAssembler(fallback_model="m")
    for piece in cut(text, points):
        assembler.add(chunk({"content": piece}))
    expected, _ = split_reasoning(text or None, None)
    assert assembler.reply().text == expected


def test_usage_styles() -> None:
    assert usage_from({"prompt_tokens": 10, "completion_tokens": 2, "prompt_cache_hit_tokens": 6}).cached_tokens == 6
    openai_style = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}}
    assert usage_from(openai_style).cached_tokens == 4
    assert usage_from({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None}).cached_tokens == 0
    assert usage_from(None).total_tokens == 0


def test_calls_without_ids_get_unique_ones() -> None:
    data = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [{"function": {"name": "a", "arguments": "{}"}}, {"function": {"name": "b"}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    first, second = parse_completion(data, fallback_model="m"), parse_completion(data, fallback_model="m")
    ids = [c.id for c in first.tool_calls + second.tool_calls]
    assert len(set(ids)) == 4 and all(ids)
    assert first.tool_calls[1].arguments == "{}"
    assert first.model == "m"


def test_reasoning_field_variants_and_unclosed_think() -> None:
    vllm = parse_completion({"choices": [{"message": {"content": "x", "reasoning": "r"}}]}, fallback_model="m")
    assert (vllm.text, vllm.reasoning) == ("x", "r")
    assert split_reasoning("<think>still thinking", None) == (None, "still thinking")
    assert split_reasoning("no think here <think>x</think>", None) == ("no think here <think>x</think>", None)


def test_history_sent_back() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{bad"}}
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "why"},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "done", "reasoning_content": "final thoughts"},
    ]
    echoed = to_wire_messages(history, echo_reasoning=True)
    assert echoed[1]["reasoning_content"] == "why"
    assert json.loads(echoed[1]["tool_calls"][0]["function"]["arguments"]) == {"_unparsed_arguments": "{bad"}
    assert "reasoning_content" not in echoed[3]
    without = to_wire_messages([{**history[1], "reasoning_content": None}], echo_reasoning=True)
    assert without[0]["reasoning_content"] == ""
    assert all("reasoning_content" not in m for m in to_wire_messages(history, echo_reasoning=False))
    assert history[1]["tool_calls"][0]["function"]["arguments"] == "{bad"  # our own history is untouched


def test_leaked_markup_does_not_override_real_tool_calls() -> None:
    real = ToolCall(id="c1", name="real", arguments="{}")
    text = '<｜DSML｜invoke name="leaked"></｜DSML｜invoke>'
    reply, leaked = recover_leaked_calls(ModelReply(text=text, tool_calls=[real]))
    assert leaked is not None and [c.name for c in reply.tool_calls] == ["real"]
    assert reply.text is None
