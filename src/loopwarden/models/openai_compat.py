"""A Model for any endpoint that speaks OpenAI Chat Completions (DeepSeek, OpenAI, vLLM,
Ollama, llama.cpp server, LM Studio), on the official `openai` SDK. The only module that
imports a provider SDK.

The SDK's own retries are off: this client retries 429 (honouring Retry-After), 5xx,
connection errors and timeouts with capped exponential backoff, then raises a `ModelError`
the loop turns into a `model_error` event. 400/401/403/404 are not retried and say what to
fix; neither is a 4xx/500 whose body says the request itself is invalid (`invalid_request`,
naming the field), except once in another message shape when the field is the `content` of a
tool-call turn. After a timeout it retries once at most, asking for a shorter reply (the
server may still be generating the first). Every request is fitted to the context window
(`budget.py`); after a `context_length` refusal it is shrunk and sent once more, never
unchanged. An empty reply, or tool-call markup that cannot be read, is asked for once more.
Every attempt that reached the server counts in `ModelReply.attempts` / `ModelError.attempts`.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai

from ..retry import Retrier, Retry, RetryPolicy
from .attempts import Attempt, Progress, Spent, cause, shorter, status_failure, transport_kind
from .base import ClientNote, Message, Model, ModelError, ModelReply, ModelRequest, Usage
from .budget import Fitted, estimate_tokens, fit_request
from .config import TOOL_CALL_CONTENT_SHAPES, EndpointConfig, Tier, ToolCallContent
from .faults import RETRYABLE_KINDS, context_window_in, model_error, redact
from .markup import strip_template_tokens
from .wire import StreamAssembler, is_empty, parse_completion, recover_leaked_calls, to_wire_messages

log = logging.getLogger(__name__)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings every SDK client of this process shares: httpx's defaults (certifi's CA
    bundle, or SSL_CERT_FILE / SSL_CERT_DIR when set), read once. Building them loads the whole CA
    bundle, about 50 ms of CPU, and a client is built per model and per event loop (each
    `run_sync`, each server job); an SSLContext may serve any number of connections and threads."""
    return httpx.create_ssl_context()


NoteHandler = Callable[[ClientNote], None]


EMPTY_REPLY_REMINDER = "Your reply was empty. Call one of the functions offered, or answer in text."
TIMEOUT_RETRIES = 1
"""Retries after a timeout: the server may still be generating, and each retry queues more work."""
SHRINK_AFTER_REFUSAL = 0.8
"""After a `context_length` refusal the request is fitted to this share of the window."""


class OpenAICompatModel:
    """One tier of one endpoint. `name` is the model name sent to the server."""

    def __init__(
        self,
        config: EndpointConfig,
        tier: Tier = "cheap",
        *,
        on_notice: NoteHandler | None = None,
        adapt: bool = True,
    ) -> None:
        """`adapt`: switch the tool-call turns' content shape when the server names it invalid."""
        self.config = config
        self.adapt = adapt
        self.tier = tier
        self.name = config.model_for(tier)
        self.on_notice = on_notice
        self._retry = RetryPolicy(
            max_attempts=config.max_retries + 1, base_delay=config.retry_base_delay, max_delay=config.retry_max_delay
        )
        self._secret = config.api_key.get_secret_value() if config.api_key else None
        self._client: openai.AsyncOpenAI | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.tool_call_content: ToolCallContent = config.tool_call_content
        """The shape in use; switched once if the server names it invalid."""
        self.learned_window: int | None = None
        """The context window a server stated in a refusal."""

    @property
    def context_window(self) -> int | None:
        return self.config.context_window or self.learned_window

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
                http_client=openai.DefaultAsyncHttpxClient(verify=tls_context()),
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
        spent = Spent()
        try:
            reply = await self._complete_checked(request, notes, spent)
        except ModelError as error:
            error.notes, error.attempts, error.usage = notes, spent.attempts, spent.usage
            raise
        # Every attempt that reached the server was paid for: its usage counts too.
        return reply.model_copy(update={"notes": notes, "attempts": spent.attempts, "usage": spent.usage})

    async def _complete_checked(self, request: ModelRequest, notes: list[ClientNote], spent: Spent) -> ModelReply:
        reply, unreadable = self._checked(await self._complete_with_retries(request, notes, spent), notes)
        if not (is_empty(reply) or unreadable):
            return reply
        what = "leaked markup with no readable call" if unreadable else "no text and no tool calls"
        if reply.finish_reason == "length":
            what += " (cut at the output token limit: raise the max_tokens of this stage)"
        self._note(ClientNote(kind="empty_reply", message=f"the reply had {what}; asking once more"), notes)
        # Not the same request again: a server with a fixed seed (or temperature 0) would give the
        # same nothing. The reminder goes to this request only, not to the run's history.
        reminder = {"role": "user", "content": EMPTY_REPLY_REMINDER if request.tools else "Please answer."}
        retry = request.model_copy(update={"messages": [*request.messages, reminder]})
        again, unreadable = self._checked(await self._complete_with_retries(retry, notes, spent), notes)
        if is_empty(again) or unreadable:
            kind = "malformed_reply" if unreadable else "empty_reply"
            raise self._error(kind, f"two replies in a row had {what}", None, 2)
        return again

    async def list_models(self) -> list[str]:
        """The model ids the endpoint offers (GET /models), for `loopwarden doctor`."""
        try:
            async with asyncio.timeout(self.config.timeout):
                page = await self._sdk().models.list()
                return [m.id async for m in page]
        except TimeoutError:
            raise self._error("timeout", f"no reply within {self.config.timeout:g}s", None, 1) from None
        except openai.APIStatusError as error:
            failed = status_failure(error)
            raise self._error(failed.kind, failed.detail, failed.status, 1) from None
        except openai.APIConnectionError as error:
            raise self._error("connection", cause(error), None, 1) from None
        except openai.APIError as error:
            raise self._error("server_error", error.message, None, 1) from None

    # -- retries -------------------------------------------------------------------------------

    async def _complete_with_retries(self, request: ModelRequest, notes: list[ClientNote], spent: Spent) -> ModelReply:
        """Retry what retry.py calls retryable, with its backoff and Retry-After; each retry is a
        note. Besides: a `context_length` refusal is shrunk and sent once more, a content shape
        the server names invalid is switched once, and a timeout is retried once, shorter."""
        retries = self._retry.max_attempts - 1
        state = Progress(self._fit(request, notes))
        tried_shapes = {self.tool_call_content}

        async def attempt() -> ModelReply | Attempt:
            fitted = state.fitted
            try:
                reply = await self._attempt(request, fitted)
            except Attempt as failed:
                self._charge(failed, fitted, request, spent)
                return failed
            spent.attempts += 1
            spent.usage += reply.usage
            return reply

        def wants_retry(outcome: ModelReply | Attempt) -> Retry | None:
            if not isinstance(outcome, Attempt):
                return None
            failed, told = outcome, f"HTTP {outcome.status}" if outcome.status else outcome.kind
            if failed.kind == "context_length" and not state.shrunk:
                state.shrunk = True
                smaller = self._shrunk(request, state.fitted, failed.detail)
                if smaller is None:
                    return None
                state.fitted = smaller
                self._note(ClientNote(kind="context_length", status=failed.status, message=(
                    f"{told}: the request was longer than the context window; "
                    f"{smaller.describe()} and sending it once more")), notes)  # fmt: skip
                return Retry(0.0)
            if failed.kind == "invalid_request" and self._switch_shape(failed, request, tried_shapes):
                self._note(ClientNote(kind="compatibility", status=failed.status, message=(
                    f"{told}: the server rejected {failed.field}; tool-call turns now sent with "
                    f"content shape {self.tool_call_content!r}")), notes)  # fmt: skip
                return Retry(0.0)
            if failed.kind == "timeout":
                state.timeouts += 1
                if state.timeouts > TIMEOUT_RETRIES:
                    return None
                state.fitted = shorter(state.fitted)
            return Retry(failed.retry_after) if failed.kind in RETRYABLE_KINDS else None

        def on_retry(outcome: ModelReply | Attempt, attempt: int, delay: float) -> None:
            assert isinstance(outcome, Attempt)
            if outcome.kind not in RETRYABLE_KINDS:
                return  # a shrunk or reshaped request: told in its own note
            status = f"HTTP {outcome.status}" if outcome.status else outcome.kind
            fitted = state.fitted
            capped = f", asking for at most {fitted.max_tokens} tokens" if outcome.kind == "timeout" else ""
            message = f"{status}: {outcome.detail[:200]}; retry {attempt} of {retries} in {delay:.2f}s{capped}"
            note = ClientNote(kind="retry", message=redact(message, self._secret), status=outcome.status, delay=delay)
            self._note(note, notes)

        done = await Retrier(self._retry).run(attempt, wants_retry, on_retry)
        if isinstance(done.outcome, Attempt):
            failed = done.outcome
            raise self._error(failed.kind, failed.detail, failed.status, done.attempts, failed.field)
        return done.outcome

    def _fit(self, request: ModelRequest, notes: list[ClientNote], shrink: float = 1.0) -> Fitted:
        fitted = fit_request(
            request.messages, request.tools, window=self.context_window, max_tokens=request.max_tokens, shrink=shrink
        )
        if fitted.clipped_chars or fitted.dropped:
            self._note(ClientNote(kind="context_budget", message=fitted.describe()), notes)
        return fitted

    def _shrunk(self, request: ModelRequest, fitted: Fitted, detail: str) -> Fitted | None:
        """A smaller request after a refusal, or None when nothing could be made smaller."""
        stated = context_window_in(detail)
        if stated:
            self.learned_window = stated
        window = self.context_window or int(
            (estimate_tokens(fitted.messages, request.tools) + (fitted.max_tokens or 0)) * SHRINK_AFTER_REFUSAL
        )
        smaller = fit_request(
            request.messages, request.tools, window=window, max_tokens=request.max_tokens, shrink=SHRINK_AFTER_REFUSAL
        )
        if smaller.messages == fitted.messages and smaller.max_tokens == fitted.max_tokens:
            return None  # the same request again would be refused again
        return smaller

    def _switch_shape(self, failed: Attempt, request: ModelRequest, tried: set[ToolCallContent]) -> bool:
        """The server named the content of a tool-call turn invalid: use the next shape."""
        turns = any(m.get("role") == "assistant" and m.get("tool_calls") for m in request.messages)
        if not (self.adapt and turns and failed.field and "content" in failed.field):
            return False
        untried = [s for s in TOOL_CALL_CONTENT_SHAPES if s not in tried]
        if not untried:
            return False
        self.tool_call_content = untried[0]
        tried.add(untried[0])
        return True

    @staticmethod
    def _charge(failed: Attempt, fitted: Fitted, request: ModelRequest, spent: Spent) -> None:
        """A failed attempt that reached the server is a model call; a timed-out one also read
        the prompt (its tokens are estimated: the server never said)."""
        if not failed.reached:
            return
        spent.attempts += 1
        if failed.kind == "timeout":
            spent.usage += Usage(prompt_tokens=fitted.prompt_tokens or estimate_tokens(fitted.messages, request.tools))

    async def _attempt(self, request: ModelRequest, fitted: Fitted) -> ModelReply:
        arguments = self._arguments(request, fitted.messages, fitted.max_tokens)
        try:
            if self.config.stream or request.on_text is not None:
                return await self._streamed(request, arguments)
            # A total deadline: DeepSeek keeps a slow non-streamed reply alive with blank lines,
            # so the HTTP read timeout alone would never fire on a stuck one.
            async with asyncio.timeout(self.config.timeout):
                completion = await self._sdk().chat.completions.create(**arguments)
                return parse_completion(_as_dict(completion), fallback_model=self.name)
        except TimeoutError:
            what = "silence between stream chunks" if self.config.stream else "wait for the whole reply"
            raise Attempt("timeout", f"{what} passed {self.config.timeout:g}s") from None
        except openai.APIStatusError as error:
            raise status_failure(error) from None
        except openai.APITimeoutError:
            raise Attempt("timeout", f"no reply within {self.config.timeout:g}s") from None
        except openai.APIConnectionError as error:
            raise Attempt("connection", cause(error), reached=False) from None
        except openai.APIError as error:  # an error event inside a stream, an unreadable body
            raise Attempt("server_error", error.message) from None
        except ValueError as error:  # JSON the SDK could not decode
            raise Attempt("server_error", f"unreadable reply: {error}") from None
        except Exception as error:
            kind = transport_kind(error)
            if kind is None:
                raise
            raise Attempt(kind, f"the reply stopped arriving: {type(error).__name__}") from None

    async def _streamed(self, request: ModelRequest, arguments: dict[str, Any]) -> ModelReply:
        """A stream may run long while it is alive: the timeout bounds the silence before the
        first chunk and between chunks, not the whole reply."""
        assembler = StreamAssembler(fallback_model=self.name)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.config.timeout) as silence:
            stream = await self._sdk().chat.completions.create(
                **arguments, stream=True, stream_options={"include_usage": True}
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
            raise Attempt("connection", f"the stream ended after {assembler.chunks} chunks, before the reply did")
        return assembler.reply()

    def _arguments(self, request: ModelRequest, messages: list[Message], max_tokens: int | None) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "model": self.name,
            "messages": to_wire_messages(
                messages, echo_reasoning=self.config.echoes_reasoning, tool_call_content=self.tool_call_content
            ),
        }
        if max_tokens is not None:
            arguments["max_tokens"] = max_tokens
        if request.tools:
            arguments["tools"] = request.tools
            if request.tool_choice is not None:
                arguments["tool_choice"] = request.tool_choice
        if self.config.extra_body:
            arguments["extra_body"] = dict(self.config.extra_body)
        return arguments

    # -- reply checks --------------------------------------------------------------------------

    def _checked(self, reply: ModelReply, notes: list[ClientNote]) -> tuple[ModelReply, bool]:
        """Recover tool calls leaked into the text; True when markup was there but unreadable.
        Chat-template tokens the server let through are removed from the text."""
        recovered, leaked = recover_leaked_calls(reply)
        if leaked is None:
            clean = strip_template_tokens(reply.text)
            if clean != reply.text and (reply.text or "").strip() != (clean or ""):
                removed = ClientNote(kind="template_tokens", message="chat-template tokens removed from the text")
                self._note(removed, notes)
                return reply.model_copy(update={"text": clean}), False
            return reply, False
        found = f"{len(leaked.calls)} tool call(s) recovered" if leaked.calls else "no call could be read"
        self._note(
            ClientNote(kind="leaked_markup", message=f"tool-call markup in the reply text: {found}"),
            notes,
        )
        return recovered, leaked.unreadable

    def _error(self, kind: str, detail: str, status: int | None, attempts: int, field: str | None = None) -> ModelError:
        error = model_error(
            kind,
            detail,
            status=status,
            model=self.name,
            endpoint=self.config.base_url,
            secret=self._secret,
            attempts=attempts,
        )
        error.field = field
        return error

    def _note(self, note: ClientNote, notes: list[ClientNote]) -> None:
        notes.append(note)
        # Not a warning: the note reaches the user in the call's event; a log line printed on
        # its own would tear through a progress bar.
        log.info("%s: %s", self.name, note.message)
        if self.on_notice is not None:
            self.on_notice(note)


def _text_delta(chunk: dict[str, Any]) -> str | None:
    choices = chunk.get("choices") or []
    delta = (choices[0].get("delta") or {}) if choices and isinstance(choices[0], dict) else {}
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) and content else None


def _as_dict(obj: Any) -> dict[str, Any]:
    dumped = obj.model_dump() if hasattr(obj, "model_dump") else obj
    return dumped if isinstance(dumped, dict) else {}


def build_model(config: EndpointConfig, tier: Tier = "cheap", *, on_notice: NoteHandler | None = None) -> Model:
    """The model of one tier (`cheap` for tool loops, `main` for drafting, `vision` for images).
    With `config.record_dir` every exchange is recorded as a cassette there."""
    model = OpenAICompatModel(config, tier, on_notice=on_notice)
    if config.record_dir is None:
        return model
    from .cassette import RecordingModel

    path = Path(config.record_dir) / f"{tier}-{os.getpid()}-{next(_RECORDINGS)}.cassette.json"
    return RecordingModel(model, meta={"tier": tier, "base_url": config.base_url}, autosave=path)


_RECORDINGS = itertools.count(1)
