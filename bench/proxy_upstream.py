"""A fast OpenAI-compatible upstream for bench_proxy.py, run as its own process: each
conversation reads TURNS distinct files (one streamed tool call per turn), then answers.

    python bench/proxy_upstream.py PORT [TURNS]
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

TURNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "bench", "choices": []}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(body)}\n\n".encode()


async def chat(request: Request) -> Response:
    body = await request.json()
    done = sum(1 for m in body["messages"] if m.get("role") == "tool")
    if done >= TURNS:
        events = [_chunk({"role": "assistant", "content": ""})]
        events += [_chunk({"content": word + " "}) for word in ["every", "file", "was", "read", "and", "summarised"]]
        events.append(_chunk({}, "stop"))
    else:
        args = json.dumps({"path": f"file_{done}.txt"})
        first = {
            "index": 0,
            "id": f"call_{done}",
            "type": "function",
            "function": {"name": "read_file", "arguments": ""},
        }
        events = [_chunk({"role": "assistant", "content": None, "tool_calls": [first]})]
        events += [
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 8]}}]})
            for i in range(0, len(args), 8)
        ]
        events.append(_chunk({}, "tool_calls"))

    async def stream() -> AsyncIterator[bytes]:
        for event in events:
            yield event
        yield b"data: [DONE]\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream")


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": "bench", "object": "model"}]})


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])

if __name__ == "__main__":
    # keep-alive longer than the client pool's (httpx: 5 s), as `loopwarden proxy` does
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", timeout_keep_alive=75)
