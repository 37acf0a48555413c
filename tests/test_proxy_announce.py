"""The proxy's terminal lines: each request tells only what it added — the verdict on every call
of its live reply, the nudge it put upstream, the stop — whether its run was resumed or replayed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from loopwarden.models.base import ModelReply, ToolCall
from loopwarden.proxy.announce import lines
from loopwarden.proxy.history import read_conversation
from loopwarden.proxy.replay import replay
from loopwarden.proxy.resume import ResumeCache
from loopwarden.proxy.settings import build_settings

READ = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
FINISH = {"type": "function", "function": {"name": "finish", "parameters": {"type": "object"}}}


async def told(cache: ResumeCache | None) -> list[list[str]]:
    policy = build_settings(upstream="http://127.0.0.1:9/v1", terminal=["finish"]).policy
    messages: list[dict[str, Any]] = [{"role": "user", "content": "summarise a.txt"}]
    per_request = []
    for k in range(8):
        body = {"model": "m", "messages": list(messages), "tools": [READ, FINISH]}
        reply = ModelReply(tool_calls=[ToolCall(id=f"c{k}", name="read_file", arguments='{"path": "a.txt"}')])

        async def upstream(forwarded: dict[str, Any], reply: ModelReply = reply) -> ModelReply:
            return reply

        outcome = await replay(body, read_conversation(body), policy, upstream, run_id="conv-x-t1", cache=cache)
        per_request.append(lines("conv-x-t1", outcome))
        if outcome.stopped:
            return per_request
        call = {"id": f"c{k}", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]}]
        messages += [{"role": "tool", "tool_call_id": f"c{k}", "content": json.dumps("hello")}]
    raise AssertionError("the guard never stopped the repeats")


@pytest.mark.parametrize("resumed", [True, False])
def test_each_request_tells_its_own_decisions_once(resumed: bool) -> None:
    per_request = asyncio.run(told(ResumeCache() if resumed else None))
    verdicts = [line.split("  ")[2].split(" ")[0] for said in per_request for line in said if "read_file(" in line]
    assert verdicts == ["allowed", "cached", "nudged", "narrowed", "stopped"]  # each told once, in order
    assert per_request[0] == ['conv-x-t1 turn 1  read_file({"path": "a.txt"})  allowed']
    assert any("nudge added to the request upstream" in line for line in per_request[3])  # after the nudged call
    assert any('tool_choice {"type": "function", "function": {"name": "finish"}}' in line for line in per_request[4])
    assert per_request[-1][-1].startswith("conv-x-t1 stopped (repeated_call): the client gets a stop message")
