"""A Model for any endpoint that speaks OpenAI Chat Completions (DeepSeek, OpenAI, vLLM,
Ollama, llama.cpp server, LM Studio), on the official `openai` SDK. The only module that
imports a provider SDK.

The SDK's own retries are off: this client retries 429 (honouring Retry-After), 5xx,
connection errors and timeouts with capped exponential backoff, then raises a `ModelError`
the loop turns into a `model_error` event. 400/401/403/404 are not retried and say what to
fix. An empty reply, or tool-call markup that cannot be read, is asked for once more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import openai

from ..retry import Retrier, Retry, RetryPolicy
from .base import ClientNote, Model, ModelError, ModelReply, ModelRequest
from .config import EndpointConfig, Tier
from .faults import RETRYABLE_KINDS, kind_of_status, model_error, redact, retry_after_seconds
from .wire import StreamAssembler, is_empty, parse_completion, recover_leaked_calls, to_wire_messages

log = logging.getLogger(__name__)


NoteHandler = Callable[[ClientNote], None]


class _Attempt(Exception):
    """One failed HTTP attempt, classified."""

    def __init__(self, kind: str, detail: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(detail)
        self.kind, self.detail, self.status, self.retry_after = kind, detail, status, retry_after


class OpenAICompatModel:
    """One tier of one endpoint. `name` is the model name sent to the server."""

    def __init__(
        self,
        config: EndpointConfig,
        tier: Tier = "cheap",
        *,
        on_notice: NoteHandler | None = None,
    ) -> None:
        self.config = config
        self.tier = tier
        self.name = config.model_for(tier)
        self.on_notice = on_notice
        self._retry = RetryPolicy(
            max_attempts=config.max_retries + 1, base_delay=config.retry_base_delay, max_delay=config.retry_max_delay
        )
        self._secret = config.api_key.get_secret_value() if config.api_key else None
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _sdk(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop. Its connection pool belongs to one loop,
        and a model object outlives loops (`Agent.run_sync` twice runs two loops)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client_loop = loop
            self._client = openai.AsyncOpenAI(
                # Local servers need no key, but the SDK wants one and would otherwise read
                # OPENAI_API_KEY from the environment and send it to a server it was not meant for.
                api_key=self._secret or "no-key",
                base_url=self.config.base_url,
                timeout=openai.Timeout(self.config.timeout, connect=min(self.config.timeout, 15.0)),
                max_retries=0,
                # A plain pooled client: the SDK's default one schedules its own closing when
                # garbage-collected, which fails noisily once its event loop is gone.
                http_client=openai.DefaultAsyncHttpxClient(),
            )
        return self._client

    def __repr__(self) -> str:
        return f"OpenAICompatModel({self.name!r}, tier={self.tier!r}, base_url={self.config.base_url!r})"

    async def aclose(self) -> None:
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.close()
        self._client = None

    # -- the Model protocol ----------------------------------------------------------------------

    async def complete(self, request: ModelRequest) -> ModelReply:
        notes: list[ClientNote] = []  # this call's retries and repairs, told in its event
        try:
            reply = await self._complete_checked(request, notes)
        except ModelError as error:
            error.notes = notes
            raise
        return reply.model_copy(update={"notes": notes})

    async def _complete_checked(self, request: ModelRequest, notes: list[ClientNote]) -> ModelReply:
        reply, unreadable = self._checked(await self._complete_with_retries(request, notes), notes)
        if not (is_empty(reply) or unreadable):
            return reply
        what = "leaked markup with no readable call" if unreadable else "no text and no tool calls"
        if reply.finish_reason == "length":
            what += " (cut at the output token limit: raise max_tokens in extra_body)"
        self._note(ClientNote(kind="empty_reply", message=f"the reply had {what}; asking once more"), notes)
        again, unreadable = self._checked(await self._complete_with_retries(request, notes), notes)
        if is_empty(again) or unreadable:
            kind = "malformed_reply" if unreadable else "empty_reply"
            raise self._error(kind, f"two replies in a row had {what}", None, 2)
        # Both replies were paid for: the usage of the first one counts too.
        return again.model_copy(update={"usage": reply.usage + again.usage})

    async def list_models(self) -> list[str]:
        """The model ids the endpoint offers (GET /models), for `loopwarden doctor`."""
        try:
            async with asyncio.timeout(self.config.timeout):
                page = await self._sdk().models.list()
                return [m.id async for m in page]
        except TimeoutError:
            raise self._error("timeout", f"no reply within {self.config.timeout:g}s", None, 1) from None
        except openai.APIStatusError as error:
            failed = _status_failure(error)
            raise self._error(failed.kind, failed.detail, failed.status, 1) from None
        except openai.APIConnectionError as error:
            raise self._error("connection", _cause(error), None, 1) from None
        except openai.APIError as error:
            raise self._error("server_error", error.message, None, 1) from None

    # -- retries -------------------------------------------------------------------------------

    async def _complete_with_retries(self, request: ModelRequest, notes: list[ClientNote]) -> ModelReply:
        """Retry what retry.py calls retryable, with its backoff and Retry-After; each retry is a note."""
        retries = self._retry.max_attempts - 1

        async def attempt() -> ModelReply | _Attempt:
            try:
                return await self._attempt(request)
            except _Attempt as failed:
                return failed

        def wants_retry(outcome: ModelReply | _Attempt) -> Retry | None:
            failed = isinstance(outcome, _Attempt) and outcome.kind in RETRYABLE_KINDS
            return Retry(outcome.retry_after) if isinstance(outcome, _Attempt) and failed else None

        def told(outcome: ModelReply | _Attempt, attempt: int, delay: float) -> None:
            assert isinstance(outcome, _Attempt)
            status = f"HTTP {outcome.status}" if outcome.status else outcome.kind
            message = f"{status}: {outcome.detail[:200]}; retry {attempt} of {retries} in {delay:.2f}s"
            note = ClientNote(kind="retry", message=redact(message, self._secret), status=outcome.status, delay=delay)
            self._note(note, notes)

        done = await Retrier(self._retry).run(attempt, wants_retry, told)
        if isinstance(done.outcome, _Attempt):
            failed = done.outcome
            raise self._error(failed.kind, failed.detail, failed.status, done.attempts)
        return done.outcome

    async def _attempt(self, request: ModelRequest) -> ModelReply:
        try:
            if self.config.stream or request.on_text is not None:
                return await self._streamed(request)
            # A total deadline: DeepSeek keeps a slow non-streamed reply alive with blank lines,
            # so the HTTP read timeout alone would never fire on a stuck one.
            async with asyncio.timeout(self.config.timeout):
                completion = await self._sdk().chat.completions.create(**self._arguments(request))
                return parse_completion(_as_dict(completion), fallback_model=self.name)
        except TimeoutError:
            what = "silence between stream chunks" if self.config.stream else "wait for the whole reply"
            raise _Attempt("timeout", f"{what} passed {self.config.timeout:g}s") from None
        except openai.APIStatusError as error:
            raise _status_failure(error) from None
        except openai.APITimeoutError:
            raise _Attempt("timeout", f"no reply within {self.config.timeout:g}s") from None
        except openai.APIConnectionError as error:
            raise _Attempt("connection", _cause(error)) from None
        except openai.APIError as error:  # an error event inside a stream, an unreadable body
            raise _Attempt("server_error", error.message) from None
        except ValueError as error:  # JSON the SDK could not decode
            raise _Attempt("server_error", f"unreadable reply: {error}") from None
        except Exception as error:
            kind = _transport_kind(error)
            if kind is None:
                raise
            raise _Attempt(kind, f"the reply stopped arriving: {type(error).__name__}") from None

    async def _streamed(self, request: ModelRequest) -> ModelReply:
        """A stream may run long while it is alive: the timeout bounds the silence before the
        first chunk and between chunks, not the whole reply."""
        assembler = StreamAssembler(fallback_model=self.name)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.config.timeout) as silence:
            stream = await self._sdk().chat.completions.create(
                **self._arguments(request), stream=True, stream_options={"include_usage": True}
            )
            async with stream:
                async for chunk in stream:
                    silence.reschedule(loop.time() + self.config.timeout)
                    data = _as_dict(chunk)
                    assembler.add(data)
                    if request.on_text is not None and (delta := _text_delta(data)):
                        request.on_text(delta)
        if assembler.finish_reason is None:
            # Every server we know ends a reply with a finish_reason; without one the stream was
            # cut (a dropped connection can look like a normal end), and half a reply would pass
            # for a whole one.
            raise _Attempt("connection", f"the stream ended after {assembler.chunks} chunks, before the reply did")
        return assembler.reply()

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self.name,
            "messages": to_wire_messages(request.messages, echo_reasoning=self.config.echoes_reasoning),
        }
        if request.tools:
            arguments["tools"] = request.tools
            if request.tool_choice is not None:
                arguments["tool_choice"] = request.tool_choice
        if self.config.extra_body:
            arguments["extra_body"] = dict(self.config.extra_body)
        return arguments

    # -- reply checks --------------------------------------------------------------------------

    def _checked(self, reply: ModelReply, notes: list[ClientNote]) -> tuple[ModelReply, bool]:
        """Recover tool calls leaked into the text; True when markup was there but unreadable."""
        recovered, leaked = recover_leaked_calls(reply)
        if leaked is None:
            return reply, False
        found = f"{len(leaked.calls)} tool call(s) recovered" if leaked.calls else "no call could be read"
        self._note(ClientNote(kind="leaked_markup", message=f"tool-call markup in the reply text: {found}"), notes)
        return recovered, leaked.unreadable

    def _error(self, kind: str, detail: str, status: int | None, attempts: int) -> ModelError:
        return model_error(
            kind,
            detail,
            status=status,
            model=self.name,
            endpoint=self.config.base_url,
            secret=self._secret,
            attempts=attempts,
        )

    def _note(self, note: ClientNote, notes: list[ClientNote]) -> None:
        notes.append(note)
        log.warning("%s: %s", self.name, note.message)
        if self.on_notice is not None:
            self.on_notice(note)


def _status_failure(error: openai.APIStatusError) -> _Attempt:
    detail = _error_detail(error)
    kind = kind_of_status(error.status_code, detail)
    return _Attempt(kind, detail, error.status_code, retry_after_seconds(dict(error.response.headers)))


def _error_detail(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return error.message


def _cause(error: Exception) -> str:
    cause = error.__cause__
    return f"{error} ({type(cause).__name__})" if cause else str(error)


def _transport_kind(error: Exception) -> str | None:
    """Transport errors raised while a stream is read are not wrapped by the SDK; they come
    from its HTTP library (httpx or httpx2, depending on the SDK version), known by name."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if not type(error).__module__.startswith(("httpx", "httpcore")):
        return None
    return "timeout" if "TimeoutException" in names or "Timeout" in type(error).__name__ else "connection"


def _text_delta(chunk: dict[str, Any]) -> str | None:
    choices = chunk.get("choices") or []
    delta = (choices[0].get("delta") or {}) if choices and isinstance(choices[0], dict) else {}
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) and content else None


def _as_dict(obj: Any) -> dict[str, Any]:
    dumped = obj.model_dump() if hasattr(obj, "model_dump") else obj
    return dumped if isinstance(dumped, dict) else {}


def build_model(config: EndpointConfig, tier: Tier = "cheap", *, on_notice: NoteHandler | None = None) -> Model:
    """The model of one tier (`cheap` for tool loops, `main` for drafting, `vision` for images)."""
    return OpenAICompatModel(config, tier, on_notice=on_notice)
