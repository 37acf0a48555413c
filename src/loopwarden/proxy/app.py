"""The proxy's HTTP face: OpenAI Chat Completions in, the guarded reply out.

A reply the guard lets through is passed on untouched (a stream byte for byte); a reply it stops
is replaced by one plain assistant message that says why, with `finish_reason="stop"`, so the
client ends its turn. Errors are OpenAI-shaped: the upstream's own passed through, the proxy's
with `type` "invalid_request_error" (4xx) or "upstream_error" (502/504). Never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..models.base import ModelReply, ModelRequest
from ..trace.exchanges import append_exchange
from ..trace.store import RunStore
from .announce import announce
from .history import CONVERSATION_HEADER, BadRequest, Conversation, read_conversation
from .replay import Outcome, WirePolicy, replay
from .resume import DEFAULT_ENTRIES, ResumeCache
from .upstream import (
    Streamed,
    Upstream,
    UpstreamError,
    post_json,
    post_stream,
    reply_from_completion,
    upstream_headers,
)

log = logging.getLogger("loopwarden.proxy")

TERMINAL_TOOLS_HEADER = "x-loopwarden-terminal-tools"
"""Comma-separated names of the client's finishing tools, added to the proxy's own."""
MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass
class ProxySettings:
    upstream: str
    """The real endpoint's base URL, e.g. https://api.deepseek.com/v1."""
    policy: WirePolicy = field(default_factory=WirePolicy)
    store_path: Path | None = None
    """The run store every exchange is kept in (`loopwarden trace`, `eval-import`); None keeps nothing."""
    timeout: float = 600.0
    api_key: str | None = None
    """Sent upstream when the client sends no key of its own."""
    resume_entries: int = DEFAULT_ENTRIES
    """Paused runs kept for the next request of their conversation (resume.py); 0 replays every
    request in full."""


def openai_error(
    status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None
) -> Response:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": None}}, status_code=status)


def create_proxy(settings: ProxySettings) -> Starlette:
    state = _ProxyState(settings)

    async def chat(request: Request) -> Response:
        return await state.chat(request)

    async def models(request: Request) -> Response:
        return await state.passthrough(request, "models")

    async def other(request: Request) -> Response:
        return await state.passthrough(request, request.path_params["rest"])

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/{rest:path}", other, methods=["GET", "POST"]),
        ],
        lifespan=state.lifespan,
    )


class _ProxyState:
    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self.client = Upstream(settings.upstream, settings.timeout)
        self.store = RunStore(settings.store_path) if settings.store_path is not None else None
        self.store_lock = asyncio.Lock()
        self.resume = ResumeCache(settings.resume_entries)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.resume.aclose()
            await self.client.aclose()
            if self.store is not None:
                self.store.close()

    def _headers(self, request: Request) -> dict[str, str]:
        headers = upstream_headers(dict(request.headers))
        if "authorization" not in {k.lower() for k in headers} and self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        return headers

    async def passthrough(self, request: Request, path: str) -> Response:
        headers = self._headers(request)
        if request.headers.get("content-type"):
            headers["Content-Type"] = request.headers["content-type"]
        try:
            status, content, kept = await self.client.request(
                request.method, path, await request.body(), headers, request.url.query
            )
        except UpstreamError as error:
            return _upstream_error(error)
        media = kept.pop("content-type", "application/json")
        return Response(content, status_code=status, media_type=media, headers=kept)

    # -- chat completions -------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return openai_error(413, f"request body over {MAX_BODY_BYTES} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            return openai_error(400, "the request body is not valid JSON")
        if not isinstance(body, dict):
            return openai_error(400, "the request body must be a JSON object")
        try:
            conversation = read_conversation(body, request.headers.get(CONVERSATION_HEADER) or None)
        except BadRequest as error:
            return openai_error(400, str(error), param=error.param)
        policy = self._policy(request)
        run_id = f"{conversation.id}-t{sum(1 for m in body['messages'] if m.get('role') == 'user')}"
        headers = self._headers(request)
        if body.get("stream"):
            return await self._stream(body, conversation, policy, run_id, headers)
        return await self._complete(body, conversation, policy, run_id, headers)

    def _policy(self, request: Request) -> WirePolicy:
        policy = self.settings.policy
        extra = request.headers.get(TERMINAL_TOOLS_HEADER)
        if not extra:
            return policy
        names = frozenset(n.strip() for n in extra.split(",") if n.strip())
        return replace(policy, terminal_tools=policy.terminal_tools | names)

    async def _complete(
        self, body: dict[str, Any], conversation: Conversation, policy: WirePolicy, run_id: str, headers: dict[str, str]
    ) -> Response:
        upstream_body: dict[str, Any] = {}

        async def upstream(forwarded: dict[str, Any]) -> ModelReply:
            data = await post_json(self.client, forwarded, headers)
            upstream_body.update(data)
            return reply_from_completion(data)

        try:
            outcome = await replay(body, conversation, policy, upstream, run_id=run_id, cache=self.resume)
        except UpstreamError as error:
            return _upstream_error(error)
        except BadRequest as error:
            return openai_error(400, str(error), param=error.param)
        await self._keep(run_id, outcome)
        announce(run_id, outcome)
        if not outcome.stopped and upstream_body:
            return JSONResponse(upstream_body, headers={"x-loopwarden-verdict": _verdict_header(outcome)})
        return JSONResponse(
            stop_completion(outcome, upstream_body, body), headers={"x-loopwarden-verdict": _verdict_header(outcome)}
        )

    async def _stream(
        self, body: dict[str, Any], conversation: Conversation, policy: WirePolicy, run_id: str, headers: dict[str, str]
    ) -> Response:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        streamed = Streamed(queue)

        async def upstream(forwarded: dict[str, Any]) -> ModelReply:
            return await post_stream(self.client, forwarded, headers, streamed)

        async def guard() -> None:
            try:
                outcome = await replay(body, conversation, policy, upstream, run_id=run_id, cache=self.resume)
                await self._keep(run_id, outcome)
                announce(run_id, outcome)
                if outcome.stopped or outcome.reply is None:
                    for event in stop_stream(outcome, streamed.last_chunk, body):
                        await queue.put(event)
                else:
                    for event in streamed.held:
                        await queue.put(event)
            except UpstreamError as error:
                if not streamed.started:
                    raise  # nothing sent yet: the client gets the error with its status
                await queue.put(_error_event(error.reason or f"upstream answered {error.status}"))
            finally:
                await queue.put(None)

        task = asyncio.create_task(guard())
        first_get = asyncio.ensure_future(queue.get())
        await asyncio.wait({task, first_get}, return_when=asyncio.FIRST_COMPLETED)
        if task.done() and task.exception() is not None and (not first_get.done() or first_get.result() is None):
            first_get.cancel()
            error = task.exception()
            if isinstance(error, UpstreamError):
                return _upstream_error(error)
            if isinstance(error, BadRequest):
                return openai_error(400, str(error), param=error.param)
            log.error("proxy: guard failed: %s: %s", type(error).__name__, error)
            return openai_error(
                502, f"the proxy could not complete the request: {type(error).__name__}", kind="upstream_error"
            )
        first = await first_get
        if task.done() and not task.cancelled() and task.exception() is None:
            # decided before a byte went out (a held tool-call reply): every event is queued,
            # so it goes out as one body, the same bytes without a streaming task per response
            held: list[bytes] = []
            item: bytes | None = first
            while item is not None:
                held.append(item)
                item = queue.get_nowait()
            return Response(b"".join(held), media_type="text/event-stream", headers=_SSE_HEADERS)

        async def body_iter() -> AsyncIterator[bytes]:
            try:
                item: bytes | None = first
                while item is not None:
                    yield item
                    item = await queue.get()
                if task.done() and not task.cancelled() and task.exception() is not None:
                    log.error("proxy: stream ended early: %s", task.exception())
            finally:
                if not task.done():  # the client went away: stop reading upstream
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task

        return StreamingResponse(body_iter(), media_type="text/event-stream", headers=_SSE_HEADERS)

    async def _keep(self, run_id: str, outcome: Outcome) -> None:
        """Store the events this request added to its run (the replay repeats earlier ones)."""
        if self.store is None:
            return
        store = self.store
        async with self.store_lock:
            await asyncio.to_thread(_append_new, store, run_id, outcome)


def _append_new(store: RunStore, run_id: str, outcome: Outcome) -> None:
    """The replay repeats the run's earlier events exactly, so only those past the stored ones are
    new; the live exchange is kept whole, so the run imports as an eval case (eval-import --db)."""
    events = outcome.events
    record = store.find_run(run_id)
    if record is None:
        store.create_run(kind="proxy", status="running", run_id=run_id)
        known = 0
    else:
        known = store.last_seq(run_id)
    for event in events[known:]:
        store.append_event(run_id, event)
    if outcome.forwarded is not None and outcome.reply is not None:
        forwarded = outcome.forwarded
        request = ModelRequest(
            messages=list(forwarded.get("messages") or []),
            tools=[t for t in forwarded.get("tools") or [] if isinstance(t, dict)],
            tool_choice=forwarded.get("tool_choice"),
        )
        model = str(forwarded.get("model") or "upstream")
        append_exchange(store, run_id, model=model, request=request, reply=outcome.reply, error=None)
    last = events[-1].model_dump(mode="json") if events else {}
    if last.get("type") == "run_finished":
        store.set_status(
            run_id,
            last["status"],
            stop_reasons=[last["stop_reason"]],
            totals=last.get("totals"),
            message=str(last.get("output") or "")[:500],
        )


def stop_text(outcome: Outcome) -> str:
    return (
        f"[loopwarden stopped this task: {outcome.stop_reason}] {outcome.stop_message}. "
        "The last proposed tool calls were not passed on. Give the user your answer from what you have, "
        "or ask them how to go on."
    )


def stop_completion(outcome: Outcome, upstream: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": upstream.get("id") or f"chatcmpl-loopwarden-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": upstream.get("created") or int(time.time()),
        "model": upstream.get("model") or request.get("model") or "loopwarden",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": stop_text(outcome)}, "finish_reason": "stop"}
        ],
        "usage": upstream.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def stop_stream(outcome: Outcome, last_chunk: dict[str, Any] | None, request: dict[str, Any]) -> list[bytes]:
    """The stop message as stream events, continuing the upstream's stream where it was cut."""
    base = {
        "id": (last_chunk or {}).get("id") or f"chatcmpl-loopwarden-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": (last_chunk or {}).get("created") or int(time.time()),
        "model": (last_chunk or {}).get("model") or request.get("model") or "loopwarden",
    }
    role = {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": stop_text(outcome)}}]}
    finish = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    events = [role, finish]
    if (request.get("stream_options") or {}).get("include_usage"):
        usage = (last_chunk or {}).get("usage") or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        events.append({**base, "choices": [], "usage": usage})
    return [f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def _error_event(message: str) -> bytes:
    error = {"error": {"message": message, "type": "upstream_error", "param": None, "code": None}}
    return f"data: {json.dumps(error)}\n\n".encode()


_SSE_HEADERS = {"cache-control": "no-cache"}


def _verdict_header(outcome: Outcome) -> str:
    if outcome.stopped:
        return f"stopped:{outcome.stop_reason}"
    actions = [v.action for v in outcome.verdicts]
    return ",".join(actions) if actions else "allowed"


def _upstream_error(error: UpstreamError) -> Response:
    if error.body:
        media = error.headers.get("content-type", "application/json")
        headers = {k: v for k, v in error.headers.items() if k.lower() != "content-type"}
        return Response(error.body, status_code=error.status, media_type=media, headers=headers)
    return openai_error(error.status, error.reason or "upstream error", kind="upstream_error")
