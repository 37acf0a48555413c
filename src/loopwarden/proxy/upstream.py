"""Talking to the real endpoint: one request body out, the reply back as loopwarden's
`ModelReply` plus the exact bytes the client is owed. Streams are split into SSE events as raw
bytes, so what is passed on is byte-for-byte what came in.

The client is aiohttp's (C-accelerated parsing, a cheap connection pool): the proxy's own cost per
request is mostly HTTP work, and at 50 concurrent conversations httpx's pool alone cost ten times
more CPU per request (bench/bench_proxy.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ..models.base import ModelReply, ToolCall, Usage

FORWARDED_HEADERS = ("authorization", "api-key", "openai-organization", "openai-project", "openai-beta")
"""Client headers sent on upstream; the key is forwarded as it came and never logged or stored."""


class UpstreamError(Exception):
    """The upstream answered with an error (passed to the client as it is) or not at all."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None, *, reason: str = "") -> None:
        super().__init__(reason or f"upstream answered {status}")
        self.status, self.body, self.headers, self.reason = status, body, headers or {}, reason


@dataclass
class Streamed:
    """A streamed reply on its way: events the client may see now go to `out`; from the first
    tool-call event on, events are held in `held` until the guard has decided."""

    out: asyncio.Queue[bytes | None]
    held: list[bytes] = field(default_factory=list)
    holding: bool = False
    started: bool = False
    """Something was already sent to the client: a later failure can only end the stream."""
    last_chunk: dict[str, Any] | None = None


def upstream_headers(client_headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in client_headers.items() if k.lower() in FORWARDED_HEADERS}


class Upstream:
    """The connection pool to the real endpoint, opened on first use in the serving loop."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.base = base_url.rstrip("/") + "/"
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=timeout)
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=512, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout, auto_decompress=True)
        return self._session

    def url(self, path: str) -> str:
        return self.base + path.lstrip("/")

    async def request(
        self, method: str, path: str, body: bytes, headers: dict[str, str], params: str = ""
    ) -> tuple[int, bytes, dict[str, str]]:
        """One request passed through as it is: status, body and content type back."""
        url = self.url(path) + (f"?{params}" if params else "")
        try:
            async with self.session().request(method, url, data=body or None, headers=headers) as response:
                content = await response.read()
                return response.status, content, _kept_headers(response)
        except (TimeoutError, aiohttp.ClientError) as error:
            raise _failure(error) from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _json_headers(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Content-Type": "application/json"}


def _encode(body: dict[str, Any]) -> bytes:
    """ASCII JSON: a lone surrogate the client escaped goes on escaped, never as invalid UTF-8."""
    return json.dumps(body, separators=(",", ":")).encode("ascii")


async def post_json(client: Upstream, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    try:
        async with client.session().post(
            client.url("chat/completions"), data=_encode(body), headers=_json_headers(headers)
        ) as response:
            status, content, kept = response.status, await response.read(), _kept_headers(response)
    except (TimeoutError, aiohttp.ClientError) as error:
        raise _failure(error) from None
    if status != 200:
        raise UpstreamError(status, content, kept)
    try:
        data = json.loads(content)
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise ValueError("no choices")
        return data
    except ValueError:
        raise UpstreamError(
            502, b"", reason="upstream answered 200 with a body that is not a chat completion"
        ) from None


def reply_from_completion(data: dict[str, Any]) -> ModelReply:
    choice = data["choices"][0] if isinstance(data["choices"][0], dict) else {}
    message = choice.get("message") or {}
    calls = [
        ToolCall(
            id=str(c.get("id") or f"call_{i}"),
            name=str((c.get("function") or {}).get("name") or ""),
            arguments=str((c.get("function") or {}).get("arguments") or "{}"),
        )
        for i, c in enumerate(message.get("tool_calls") or [])
        if isinstance(c, dict)
    ]
    content = message.get("content")
    return ModelReply(
        text=content if isinstance(content, str) else None,
        tool_calls=calls,
        usage=_usage(data.get("usage")),
        finish_reason=choice.get("finish_reason"),
        model=data.get("model"),
    )


async def post_stream(
    client: Upstream, body: dict[str, Any], headers: dict[str, str], streamed: Streamed
) -> ModelReply:
    """Stream the reply: text events go to the client as they arrive, tool-call events are held."""
    assembler = _Assembler()
    try:
        async with client.session().post(
            client.url("chat/completions"), data=_encode(body), headers=_json_headers(headers)
        ) as response:
            if response.status != 200:
                raise UpstreamError(response.status, await response.read(), _kept_headers(response))
            async for raw in sse_events(response.content.iter_any()):
                chunk = _chunk(raw)
                if chunk is not None:
                    assembler.add(chunk)
                    streamed.last_chunk = chunk
                    streamed.holding = streamed.holding or _has_tool_calls(chunk)
                if streamed.holding or _is_done(raw):
                    streamed.held.append(raw)
                else:
                    streamed.started = True
                    await streamed.out.put(raw)
    except (TimeoutError, aiohttp.ClientError) as error:
        raise _failure(error) from None
    return assembler.reply()


def _failure(error: Exception) -> UpstreamError:
    if isinstance(error, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        return UpstreamError(502, b"", reason=f"upstream unreachable: {type(error).__name__}: {error}")
    if isinstance(error, TimeoutError):  # aiohttp's read timeouts are TimeoutErrors too
        return UpstreamError(504, b"", reason=f"upstream timed out: {type(error).__name__}")
    return UpstreamError(502, b"", reason=f"upstream connection broke: {type(error).__name__}: {error}")


async def sse_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Split a byte stream into SSE events, each with its blank-line terminator, bytes unchanged."""
    buffer = b""
    async for piece in chunks:
        buffer += piece
        while True:
            cut = _event_end(buffer)
            if cut < 0:
                break
            yield buffer[:cut]
            buffer = buffer[cut:]
    if buffer:
        yield buffer


def _event_end(buffer: bytes) -> int:
    ends = [i + len(sep) for sep in (b"\r\n\r\n", b"\n\n", b"\r\r") if (i := buffer.find(sep)) >= 0]
    return min(ends) if ends else -1


def _data(raw: bytes) -> str | None:
    lines = [line for line in raw.replace(b"\r\n", b"\n").split(b"\n") if line.startswith(b"data:")]
    if not lines:
        return None
    return "\n".join(line[5:].lstrip(b" ").decode("utf-8", "replace") for line in lines)


def _chunk(raw: bytes) -> dict[str, Any] | None:
    data = _data(raw)
    if data is None or data.strip() == "[DONE]":
        return None
    try:
        chunk = json.loads(data)
    except ValueError:
        return None
    return chunk if isinstance(chunk, dict) else None


def _is_done(raw: bytes) -> bool:
    data = _data(raw)
    return data is not None and data.strip() == "[DONE]"


def _has_tool_calls(chunk: dict[str, Any]) -> bool:
    for choice in chunk.get("choices") or []:
        if isinstance(choice, dict):
            delta = choice.get("delta") or {}
            if delta.get("tool_calls") or choice.get("finish_reason") == "tool_calls":
                return True
    return False


class _Assembler:
    """The reply a stream adds up to: text, tool calls by index, usage, finish reason."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.usage: Usage = Usage()
        self.finish: str | None = None
        self.model: str | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        self.model = self.model or chunk.get("model")
        if isinstance(chunk.get("usage"), dict):
            self.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            for j, part in enumerate(delta.get("tool_calls") or []):
                if not isinstance(part, dict):
                    continue
                slot = self.calls.setdefault(int(part.get("index", j)), {"id": "", "name": "", "arguments": ""})
                slot["id"] = slot["id"] or str(part.get("id") or "")
                function = part.get("function") or {}
                slot["name"] += str(function.get("name") or "")
                slot["arguments"] += str(function.get("arguments") or "")
            self.finish = choice.get("finish_reason") or self.finish

    def reply(self) -> ModelReply:
        calls = [
            ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"] or "{}")
            for i, c in sorted(self.calls.items())
        ]
        text = "".join(self.text) or None
        return ModelReply(text=text, tool_calls=calls, usage=self.usage, finish_reason=self.finish, model=self.model)


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        prompt_tokens=int(raw.get("prompt_tokens") or 0),
        completion_tokens=int(raw.get("completion_tokens") or 0),
        cached_tokens=int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0),
    )


def _kept_headers(response: aiohttp.ClientResponse) -> dict[str, str]:
    keep = ("retry-after", "x-request-id", "content-type")
    kept = {k.lower(): v for k, v in response.headers.items()}
    return {k: v for k, v in kept.items() if k in keep or k.startswith("x-ratelimit")}
