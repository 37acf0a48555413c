"""The client's own cost per model call: `OpenAICompatModel.complete` (retries, fault
classification, reasoning handling, markup check, stream assembly) against the bare `openai`
SDK call (the baseline), both talking to the same scripted server on 127.0.0.1, same run.

    python bench/openai_client.py [calls]

Prints the median time per call for each, and the ratio client / bare SDK. The scripted
server is the one the tests use (tests/openai_server.py).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from loopwarden.models.base import ModelRequest
from loopwarden.models.config import EndpointConfig
from loopwarden.models.openai_compat import OpenAICompatModel
from openai_server import Reply, ScriptedServer, completion, reply, stream, tool_call

CALLS = [tool_call("read_file", {"path": f"notes/file_{i}.txt", "limit": 200}, f"c{i}") for i in range(3)]
MESSAGES: list[Any] = [{"role": "user", "content": "read the notes " * 50}]


def scripted(streaming: bool) -> Reply:
    return stream("Reading them now.", CALLS, pieces=8) if streaming else reply(completion("Reading.", CALLS))


async def bare(client: openai.AsyncOpenAI, streaming: bool) -> None:
    if streaming:
        response = await client.chat.completions.create(model="test-model", messages=MESSAGES, stream=True)
        async for _ in response:
            pass
    else:
        await client.chat.completions.create(model="test-model", messages=MESSAGES)


async def measure(n: int, streaming: bool, base_url: str) -> tuple[float, float]:
    config = EndpointConfig(base_url=base_url, cheap_model="test-model", main_model="test-model", stream=streaming)
    model = OpenAICompatModel(config)
    client = openai.AsyncOpenAI(api_key="no-key", base_url=base_url, max_retries=0)
    request = ModelRequest(messages=MESSAGES)
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(n):  # interleaved, so drift in the machine's load hits both alike
        began = time.perf_counter()
        await bare(client, streaming)
        theirs.append(time.perf_counter() - began)
        began = time.perf_counter()
        await model.complete(request)
        ours.append(time.perf_counter() - began)
    await client.close()
    await model.aclose()
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    for streaming in (False, True):
        with ScriptedServer(respond=lambda body, s=streaming: scripted(s)) as server:
            ours, theirs = asyncio.run(measure(n, streaming, server.base_url))
        label = "stream (SSE)" if streaming else "non-stream"
        print(
            f"{label:13s} median per call: loopwarden client {ours * 1e3:6.2f} ms, "
            f"bare openai SDK {theirs * 1e3:6.2f} ms, ratio {ours / theirs:4.2f}x  ({n} calls each)"
        )


if __name__ == "__main__":
    main()
