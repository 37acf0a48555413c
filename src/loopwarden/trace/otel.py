"""OpenTelemetry export (extra `otel`) following the GenAI semantic conventions: one
`invoke_agent` span per run, a `chat {model}` client span per model call and an
`execute_tool {tool}` span per tool call, children of the run span. Guard verdicts and
nudges become span events; the stop reason, status and totals are attributes of the run span.

    exporter = OtelTracer(trace_provider.get_tracer("loopwarden"), agent_name="notes")
    async for event in exporter.trace(agent.stream("question")):
        ...

Spans are built from the events themselves (each model and tool event carries its duration),
so the same code exports a live run or a stored trace (`export_events(events)`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from ..events import (
    Event,
    GuardVerdict,
    ModelCalled,
    ModelFailed,
    NudgeInjected,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallProposed,
)

# GenAI semantic-convention attribute names (opentelemetry semconv, gen_ai.*).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class OtelTracer:
    """Turns one run's events into spans. One instance per run."""

    def __init__(self, tracer: Tracer | None = None, *, agent_name: str = "loopwarden", provider: str = "openai"):
        self.tracer = tracer or trace.get_tracer("loopwarden")
        self.agent_name = agent_name
        self.provider = provider
        self.run_span: Span | None = None
        self._tools: dict[str, tuple[ToolCallProposed, Span]] = {}
        self._model: str | None = None

    async def trace(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """Pass events through, exporting spans as they happen."""
        try:
            async for event in events:
                self.observe(event)
                yield event
        finally:
            self.close("the event stream ended before run_finished")

    def export_events(self, events: Iterable[Event]) -> None:
        for event in events:
            self.observe(event)
        self.close("the trace ended before run_finished")

    def observe(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._start_run(event)
        elif isinstance(event, ModelCalled):
            self._model_span(event)
        elif isinstance(event, ModelFailed):
            self._model_failed(event)
        elif isinstance(event, ToolCallProposed):
            self._start_tool(event)
        elif isinstance(event, ToolCallFinished):
            self._end_tool(event)
        elif isinstance(event, GuardVerdict):
            self._verdict(event)
        elif isinstance(event, NudgeInjected) and self.run_span is not None:
            self.run_span.add_event("loopwarden.nudge", {"loopwarden.detector": event.detector}, _ns(event.ts))
        elif isinstance(event, RunFinished):
            self._end_run(event)

    def close(self, reason: str) -> None:
        """End whatever is still open (a stream that broke off), marked as an error."""
        for _, span in self._tools.values():
            span.set_status(Status(StatusCode.ERROR, reason))
            span.end()
        self._tools.clear()
        if self.run_span is not None:
            self.run_span.set_status(Status(StatusCode.ERROR, reason))
            self.run_span.end()
            self.run_span = None

    # -- spans ----------------------------------------------------------------------------------

    def _context(self) -> Any:
        return trace.set_span_in_context(self.run_span) if self.run_span is not None else None

    def _start_run(self, event: RunStarted) -> None:
        self._model = event.model
        attributes: dict[str, Any] = {
            OPERATION: "invoke_agent",
            PROVIDER: self.provider,
            AGENT_NAME: self.agent_name,
            CONVERSATION_ID: event.run_id,
            REQUEST_MODEL: event.model,
            "loopwarden.tools_offered.count": len(event.tools),
            "loopwarden.policy": event.policy,
        }
        if event.intent:
            attributes["loopwarden.intent"] = event.intent
        self.run_span = self.tracer.start_span(
            f"invoke_agent {self.agent_name}", kind=SpanKind.INTERNAL, start_time=_ns(event.ts), attributes=attributes
        )

    def _model_span(self, event: ModelCalled) -> None:
        start = event.ts - event.duration_ms / 1000
        attributes: dict[str, Any] = {
            OPERATION: "chat",
            PROVIDER: self.provider,
            REQUEST_MODEL: self._model or event.model,
            RESPONSE_MODEL: event.model,
            INPUT_TOKENS: event.usage.prompt_tokens,
            OUTPUT_TOKENS: event.usage.completion_tokens,
            CACHE_READ_TOKENS: event.usage.cached_tokens,
            "loopwarden.turn": event.turn,
            "loopwarden.tools_offered": event.tools_offered,
            "loopwarden.tools_offered.count": event.n_tools_offered,
            "loopwarden.tool_calls.count": event.n_tool_calls,
        }
        span = self.tracer.start_span(
            f"chat {self._model or event.model}",
            context=self._context(),
            kind=SpanKind.CLIENT,
            start_time=_ns(start),
            attributes=attributes,
        )
        span.end(end_time=_ns(event.ts))

    def _model_failed(self, event: ModelFailed) -> None:
        span = self.tracer.start_span(
            f"chat {self._model or 'model'}",
            context=self._context(),
            kind=SpanKind.CLIENT,
            start_time=_ns(event.ts),
            attributes={OPERATION: "chat", PROVIDER: self.provider, ERROR_TYPE: event.kind},
        )
        span.set_status(Status(StatusCode.ERROR, event.message))
        span.end(end_time=_ns(event.ts))

    def _start_tool(self, event: ToolCallProposed) -> None:
        span = self.tracer.start_span(
            f"execute_tool {event.tool}",
            context=self._context(),
            kind=SpanKind.INTERNAL,
            start_time=_ns(event.ts),
            attributes={
                OPERATION: "execute_tool",
                TOOL_NAME: event.tool,
                TOOL_CALL_ID: event.call_id,
                TOOL_TYPE: "function",
                "loopwarden.turn": event.turn,
                "loopwarden.args_hash": event.args_hash,
            },
        )
        self._tools[event.call_id] = (event, span)

    def _end_tool(self, event: ToolCallFinished) -> None:
        opened = self._tools.pop(event.call_id, None)
        if opened is None:
            return
        _, span = opened
        span.set_attribute("loopwarden.executed", event.executed)
        span.set_attribute("loopwarden.cached", event.cached)
        span.set_attribute("loopwarden.attempts", event.attempts)
        if not event.ok:
            span.set_attribute(ERROR_TYPE, event.error_type or "error")
            span.set_status(Status(StatusCode.ERROR, event.message or event.error_type or "error"))
        span.end(end_time=_ns(event.ts))

    def _verdict(self, event: GuardVerdict) -> None:
        attributes: dict[str, Any] = {
            "loopwarden.detector": event.detector,
            "loopwarden.action": event.action,
            "loopwarden.reason": event.reason,
        }
        target = self._tools.get(event.call_id or "")
        span = target[1] if target else self.run_span
        if span is not None:
            span.add_event("loopwarden.guard_verdict", attributes, _ns(event.ts))

    def _end_run(self, event: RunFinished) -> None:
        span = self.run_span
        if span is None:
            return
        t = event.totals
        span.set_attribute(INPUT_TOKENS, t.prompt_tokens)
        span.set_attribute(OUTPUT_TOKENS, t.completion_tokens)
        span.set_attribute("loopwarden.status", event.status)
        span.set_attribute("loopwarden.stop_reason", event.stop_reason)
        span.set_attribute("loopwarden.model_calls", t.model_calls)
        span.set_attribute("loopwarden.tool_executions", t.tool_executions)
        span.set_attribute("loopwarden.duplicates_avoided", t.duplicates_avoided)
        if event.status == "failed":
            span.set_status(Status(StatusCode.ERROR, event.stop_reason))
        span.end(end_time=_ns(event.ts))
        self.run_span = None
