"""An agent framework driven end to end through the proxy: the OpenAI Agents SDK, its own loop
and its own tool execution, pointed at the proxy's base URL. A collapsing upstream model is
stopped within the in-process runtime's bound; a healthy run passes untouched."""

from __future__ import annotations

import asyncio
from importlib.util import find_spec
from typing import Any

import pytest

from openai_server import Reply, ScriptedServer, completion, reply, tool_call
from proxykit import in_process_phase_calls, proxy_in_front

# Looked up, not imported: run_agent imports the SDK (~5 s of CPU), on the worker that runs these
# tests only, not in every xdist worker's collection.
if find_spec("agents") is None:
    pytest.skip("the OpenAI Agents SDK is in the 'dev' extra", allow_module_level=True)


def run_agent(base_url: str, max_turns: int = 40) -> tuple[str, list[str]]:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # nothing leaves 127.0.0.1
    read: list[str] = []

    @function_tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: the file name
        """
        read.append(path)
        return f"contents of {path}"

    async def run() -> str:
        # The client is closed on the loop that used it: left to the garbage collector, the SDK's
        # client schedules its closing on whichever loop runs then (a later test's) and fails there.
        async with AsyncOpenAI(base_url=base_url, api_key="sk-agents", max_retries=0) as client:
            agent = Agent(
                name="reader",
                instructions="Read the files, then answer.",
                tools=[read_file],
                model=OpenAIChatCompletionsModel(model="upstream-model", openai_client=client),
            )
            result = await Runner.run(agent, "Summarise the files.", max_turns=max_turns)
            return str(result.final_output)

    return asyncio.run(run()), read


def test_the_agents_sdk_is_stopped_through_the_proxy() -> None:
    def collapse(body: dict[str, Any]) -> Reply:
        return reply(completion(tool_calls=[tool_call("read_file", {"path": "a.txt"})]))

    with ScriptedServer(respond=collapse) as upstream, proxy_in_front(upstream) as base:
        output, read = run_agent(base)
        calls = len(upstream.requests)
    assert calls == in_process_phase_calls()
    assert "loopwarden stopped this task: repeated_call" in output
    assert read == ["a.txt"] * (calls - 1)  # the stopped reply's call never reached the tool


def test_a_healthy_agents_sdk_run_passes_untouched() -> None:
    with ScriptedServer() as upstream, proxy_in_front(upstream) as base:
        upstream.push(
            *[reply(completion(tool_calls=[tool_call("read_file", {"path": f"f{i}.txt"})])) for i in range(14)]
        )
        upstream.push(reply(completion(text="Fourteen files, all read.")))
        output, read = run_agent(base)
        sent = upstream.requests
    assert output == "Fourteen files, all read."
    assert read == [f"f{i}.txt" for i in range(14)]
    assert all("tool_choice" not in body or body["tool_choice"] != "none" for body in sent)
    assert all(sum(1 for m in body["messages"] if m["role"] == "user") == 1 for body in sent)  # no nudge added
