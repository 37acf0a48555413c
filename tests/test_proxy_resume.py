"""The proxy's incremental replay (proxy/resume.py): a run paused after its verdicts on one
request and resumed by the next gives exactly what a full replay of the next request gives —
verdicts, stops, the body sent upstream and every event — over random conversations, with random
restarts (a lost cache) in between; and the cache is bounded."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models.base import ModelReply, ToolCall, Usage
from loopwarden.proxy.history import read_conversation
from loopwarden.proxy.replay import Outcome, WirePolicy, replay
from loopwarden.proxy.resume import ResumeCache
from loopwarden.proxy.settings import build_settings


def _tool(name: str, parameter: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {parameter: {"type": "string"}}, "required": [parameter]}
    return {"type": "function", "function": {"name": name, "description": name, "parameters": schema}}


TOOLS = [_tool("read_file", "path"), _tool("search", "query"), _tool("finish", "answer")]
CALLS = [
    ("read_file", {"path": "a.txt"}),
    ("read_file", {"path": "b.txt"}),
    ("search", {"query": "x"}),
    ("search", {"query": "y"}),
    ("finish", {"answer": "done"}),
]
RESULTS = ["same text", "line 1\nline 2", '{"ok": false, "error": "not_found", "message": "no such file"}', "[]"]
TEXTS = [None, "", "Let me look.", "Let me look.", "I will read the file again."]


@dataclass
class Turn:
    text: str | None
    calls: list[tuple[str, dict[str, Any]]]
    results: list[str]
    tokens: int


turns = st.builds(
    Turn,
    text=st.sampled_from(TEXTS),
    calls=st.lists(st.sampled_from(CALLS), min_size=0, max_size=2),
    results=st.lists(st.sampled_from(RESULTS), min_size=2, max_size=2),
    tokens=st.integers(1, 5000),
).filter(lambda t: bool(t.calls) or bool(t.text))
conversations = st.lists(turns, min_size=1, max_size=12)
policies = st.sampled_from([(3, 4, 5), (2, 3, 4), (2, 2, 3), (0, 0, 3)])


def policy_of(rungs: tuple[int, int, int], max_tokens: int | None) -> WirePolicy:
    settings = build_settings(upstream="http://127.0.0.1:9/v1", terminal=["finish"], rungs=rungs, max_tokens=max_tokens)
    return settings.policy


def live_reply(k: int, turn: Turn) -> ModelReply:
    calls = [ToolCall(id=f"call_{k}_{j}", name=n, arguments=json.dumps(a)) for j, (n, a) in enumerate(turn.calls)]
    return ModelReply(
        text=turn.text,
        tool_calls=calls,
        usage=Usage(prompt_tokens=turn.tokens, completion_tokens=turn.tokens // 10),  # real usage: not the estimate
        finish_reason="tool_calls" if calls else "stop",
        model="upstream-model-7",
        reasoning="thinking..." if k % 2 else None,
    )


def plain(value: Any) -> Any:
    """An event without what only the clock decides."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in ("ts", "duration_ms", "duration_s")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def summary(outcome: Outcome) -> dict[str, Any]:
    return {
        "verdicts": [(v.call_id, v.tool, v.action, v.reason) for v in outcome.verdicts],
        "stop": (outcome.stop_reason, outcome.stop_message),
        "forwarded": outcome.forwarded,
        "output": outcome.final_output,
        "fresh": outcome.fresh,
        "events": [plain(e.model_dump(mode="json")) for e in outcome.events],
    }


async def walk(
    conversation: list[Turn], policy: WirePolicy, cache: ResumeCache | None, restarts: set[int]
) -> tuple[list[dict[str, Any]], int, int]:
    """A client driving the conversation through the proxy's replay, one request per turn, as a
    coding agent does. Returns each request's outcome, and the resumes expected and seen."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You edit files."},
        {"role": "user", "content": "fix"},
    ]
    seen: list[dict[str, Any]] = []
    expected = hits = 0
    for k, turn in enumerate(conversation):
        if cache is not None and k in restarts:
            await cache.aclose()
            cache = ResumeCache()  # a restarted proxy: nothing paused survives
        elif cache is not None and k > 0:
            expected += 1
        body = {"model": "m", "messages": copy.deepcopy(messages), "tools": TOOLS, "temperature": 0}
        reply = live_reply(k, turn)

        async def upstream(forwarded: dict[str, Any], reply: ModelReply = reply) -> ModelReply:
            return reply

        before = cache.hits if cache is not None else 0
        outcome = await replay(body, read_conversation(body), policy, upstream, run_id="conv-1-t1", cache=cache)
        seen.append(summary(outcome))
        hits += (cache.hits - before) if cache is not None else 0
        if outcome.stopped or outcome.reply is None or not outcome.reply.tool_calls:
            break
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in outcome.reply.tool_calls
        ]
        echo: dict[str, Any] = {"role": "assistant", "content": outcome.reply.text, "tool_calls": calls}
        if k % 3 == 0:
            echo["refusal"] = None  # an SDK's own fields on the echo: the run does not read them
        messages.append(echo)
        for j, call in enumerate(calls):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": turn.results[j % 2]})
    if cache is not None:
        await cache.aclose()
    return seen, expected, hits


@given(
    conversation=conversations,
    rungs=policies,
    max_tokens=st.sampled_from([None, 3000, 20000]),
    restarts=st.sets(st.integers(1, 11), max_size=3),
)
def test_a_resumed_run_decides_exactly_as_a_full_replay(
    conversation: list[Turn], rungs: tuple[int, int, int], max_tokens: int | None, restarts: set[int]
) -> None:
    policy = policy_of(rungs, max_tokens)

    async def both() -> None:
        replayed, _, _ = await walk(conversation, policy, None, set())
        resumed, expected, hits = await walk(conversation, policy, ResumeCache(), restarts)
        assert resumed == replayed
        assert hits == expected  # every request after the first resumed, except after a restart
        for before, after in itertools.pairwise(replayed):  # what a request told first
            assert after["events"][: after["fresh"]] == before["events"]

    asyncio.run(both())


def test_a_conversation_of_many_turns_resumes_every_turn_and_is_never_replayed() -> None:
    conversation = [Turn(None, [("read_file", {"path": f"f{k}.txt"})], [f"text {k}", ""], 100) for k in range(40)]
    policy = policy_of((3, 4, 5), None)

    async def go() -> None:
        cache = ResumeCache()
        seen, _, _ = await walk(conversation[:1], policy, cache, set())
        assert seen[0]["verdicts"][0][2] == "allowed"
        replayed, _, _ = await walk(conversation, policy, None, set())
        resumed, expected, hits = await walk(conversation, policy, ResumeCache(), set())
        assert resumed == replayed and hits == expected == 39

    asyncio.run(go())


def test_the_cache_is_bounded_and_closes_what_it_drops() -> None:
    closed: list[str] = []

    @dataclass
    class Entry:
        name: str
        size: int

        async def aclose(self) -> None:
            closed.append(self.name)

    async def go() -> None:
        cache = ResumeCache(max_entries=2, max_bytes=100)
        for name in "abc":
            await cache.put(name, Entry(name, 10))
        assert closed == ["a"] and len(cache) == 2
        await cache.put("big", Entry("big", 95))  # over the byte bound together with the others
        assert closed == ["a", "b", "c"] and len(cache) == 1
        await cache.put("huge", Entry("huge", 101))  # larger than the bound: never kept
        assert closed[-1] == "huge" and cache.take("huge") is None
        assert cache.take("big") is not None and cache.take("big") is None  # a paused run is used once
        await cache.aclose()

    asyncio.run(go())
