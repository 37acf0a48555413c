"""What MCPTools costs, against the official SDK's own client, in the same run on the same server
(the notes server of loopwarden.examples.mcp_notes with 200 catalogue tools, over stdio):

    python bench/bench_mcp.py [--calls 200]

- the schema a model is sent on its first turn: all 205 tools against `search_tools` (what an
  `Agent` given the server offers by itself), in characters of the `tools=[...]` JSON;
- the time of one `tools/call` made with the SDK's `Client` directly, with `MCPTools.call`, and as
  one call inside an `Agent` run (a scripted model: one call, then an answer), as medians and as
  ratios to the SDK's own. Timing only: nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from mcp import Client, StdioServerParameters

from loopwarden import Agent, FunctionModel, ModelRequest, call
from loopwarden.models.scripted import ReplyLike
from loopwarden.tools.mcp import MCPTools

SERVER = [sys.executable, "-m", "loopwarden.examples.mcp_notes", "--catalogue", "200"]


async def timed(calls: int, one: Callable[[int], Awaitable[object]]) -> float:
    """Median seconds of `calls` awaits of `one(i)` (after 5 not counted: imports, first paths)."""
    samples = []
    for i in range(calls + 5):
        began = time.perf_counter()
        await one(i)
        samples.append(time.perf_counter() - began)
    return statistics.median(samples[5:])


async def main(calls: int) -> None:
    async with Client(StdioServerParameters(command=SERVER[0], args=SERVER[1:])) as client:
        sdk = await timed(calls, lambda i: client.call_tool("read_note", {"name": ["pump", "probe", "todo"][i % 3]}))

    async with MCPTools.stdio(SERVER[0], SERVER[1:]) as notes:
        own = await timed(calls, lambda i: notes.call("read_note", {"name": ["pump", "probe", "todo"][i % 3]}))

        def reply(request: ModelRequest) -> ReplyLike:
            if any(m.get("role") == "tool" for m in request.messages):
                return "read"
            return call("notes__read_note", {"name": "pump"})

        direct = Agent(FunctionModel(reply), notes.tools)  # all tools offered: no search turn in the timing
        agent = await timed(calls, lambda i: direct.run("read the pump note"))

        full = len(json.dumps(direct.registry.openai_tools()))
        searched = Agent(FunctionModel(reply), [notes])
        assert searched.tool_search is not None
        first = len(json.dumps(searched.registry.openai_tools([searched.tool_search.name])))

    print(f"notes server, {len(notes.tools)} tools, over stdio; {calls} calls each")
    print(f"first-turn schema: all tools {full} chars, search_tools {first} chars ({full / first:.0f}x less)")
    print(f"SDK Client.call_tool:      {sdk * 1e3:7.2f} ms per call (baseline)")
    print(f"MCPTools.call:             {own * 1e3:7.2f} ms per call ({own / sdk:.2f}x)")
    print(f"Agent run with one call:   {agent * 1e3:7.2f} ms per run  ({agent / sdk:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(main(parser.parse_args().calls))
