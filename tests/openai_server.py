"""A real HTTP server on 127.0.0.1 that speaks OpenAI Chat Completions, scripted per test.

    with ScriptedServer() as server:
        server.push(error(429, "slow down", retry_after="0.1"), reply(completion(text="hi")))
        ...point the real `openai` SDK at server.base_url...
        server.requests  # every JSON body received, in order

Each request to /v1/chat/completions takes the next scripted `Reply` (or asks `respond`
when the queue is empty). A Reply can be a JSON body with any status and headers, an SSE
stream (`chunks`), a delay, or a hang. GET /v1/models lists `models`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds before anything is sent."""
    hang: bool = False
    """Send nothing until the server closes (a hung upstream)."""
    chunks: list[dict[str, Any] | str] | None = None
    """An SSE stream: dicts go out as `data: <json>`, strings as raw SSE text; `[DONE]` is added."""
    chunk_delay: float = 0.0
    hang_after_chunks: bool = False
    done: bool = True
    """End the stream with `data: [DONE]`; False = the connection just closes."""


Respond = Callable[[dict[str, Any]], Reply]


def tool_call(name: str, arguments: dict[str, Any] | str, id: str | None = None) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": id or f"call_{name}_{time.monotonic_ns()}",
        "type": "function",
        "function": {"name": name, "arguments": raw},
    }


def usage(prompt: int = 11, completion: int = 7, *, cached: int | None = None, style: str = "openai") -> dict[str, Any]:
    data: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None and style == "deepseek":
        data |= {"prompt_cache_hit_tokens": cached, "prompt_cache_miss_tokens": prompt - cached}
    elif cached is not None:
        data["prompt_tokens_details"] = {"cached_tokens": cached}
    return data


def completion(
    text: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    reasoning: str | None = None,
    model: str = "test-model",
    finish_reason: str | None = None,
    usage_: dict[str, Any] | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}
        ],
        "usage": usage_ if usage_ is not None else usage(),
    }


def reply(body: dict[str, Any], **options: Any) -> Reply:
    return Reply(body=body, **options)


def error(status: int, message: str, *, retry_after: str | None = None, code: str | None = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Reply(status=status, body={"error": {"message": message, "type": "error", "code": code}}, headers=headers)


def stream(
    text: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    reasoning: str | None = None,
    pieces: int = 3,
    model: str = "test-model",
    usage_: dict[str, Any] | None = None,
    chunk_delay: float = 0.0,
) -> Reply:
    """An SSE stream that splits the text, the reasoning and every tool call's arguments into
    `pieces` deltas, the way providers do (id and name only in a call's first delta)."""
    base = {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning_content": part}) for part in split(reasoning, pieces)]
    chunks += [chunk({"content": part}) for part in split(text, pieces)]
    for index, call in enumerate(tool_calls or []):
        arguments = call["function"]["arguments"]
        first = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        chunks.append(chunk({"tool_calls": [first | {"function": first["function"] | {"arguments": ""}}]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in split(arguments, pieces)
        ]
    chunks.append(chunk({}, "tool_calls" if tool_calls else "stop"))
    chunks.append({**base, "choices": [], "usage": usage_ if usage_ is not None else usage()})
    return Reply(chunks=chunks, chunk_delay=chunk_delay)


def split(text: str | None, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedServer:
    def __init__(self, *, models: list[str] | None = None, respond: Respond | None = None) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.models = models if models is not None else ["test-model", "test-main"]
        self.models_reply: Reply | None = None
        """Overrides GET /models (e.g. a 401 for a bad key)."""
        self.respond = respond
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        if self.respond is not None:
            return self.respond(body)
        return error(500, "the test script has no reply left")

    def close(self) -> None:
        self.closing.set()
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models") and server.models_reply is not None:
                self._send_json(server.models_reply.status, server.models_reply.body, server.models_reply.headers)
            elif self.path.rstrip("/").endswith("/models"):
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in server.models]
                self._send_json(200, {"object": "list", "data": data}, {})
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}}, {})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"no route {self.path}"}}, {})
                return
            body = json.loads(raw or b"{}")
            server.requests.append(body)
            server.headers.append({k.lower(): v for k, v in self.headers.items()})
            scripted = server.next_reply(body)
            if scripted.delay:
                server.closing.wait(scripted.delay)
            if scripted.hang:
                server.closing.wait(60)
                return
            if scripted.chunks is not None:
                self._send_stream(scripted)
            else:
                self._send_json(scripted.status, scripted.body, scripted.headers)

        def _send_json(self, status: int, body: dict[str, Any] | str | None, headers: dict[str, str]) -> None:
            data = (body if isinstance(body, str) else json.dumps(body if body is not None else {})).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, scripted: Reply) -> None:
            self.send_response(scripted.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            assert scripted.chunks is not None
            try:
                for item in scripted.chunks:
                    text = item if isinstance(item, str) else f"data: {json.dumps(item)}\n\n"
                    self.wfile.write(text.encode())
                    self.wfile.flush()
                    if scripted.chunk_delay:
                        server.closing.wait(scripted.chunk_delay)
                if scripted.hang_after_chunks:
                    server.closing.wait(60)
                    return
                if scripted.done:
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to do
            self.close_connection = True

    return Handler
