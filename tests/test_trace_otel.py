"""OpenTelemetry export with the SDK's in-memory exporter: a span per run, per model call and
per tool call, with GenAI semantic-convention attributes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trace_fixtures import collapsing_agent

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from loopwarden.events import ModelCalled, ToolCallProposed
from loopwarden.trace.otel import OtelTracer


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory, provider
    provider.shutdown()


def by_operation(spans: tuple[ReadableSpan, ...], operation: str) -> list[ReadableSpan]:
    return [s for s in spans if s.attributes and s.attributes.get("gen_ai.operation.name") == operation]


async def test_a_run_becomes_agent_chat_and_tool_spans(exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    memory, provider = exporter
    otel = OtelTracer(provider.get_tracer("test"), agent_name="notes")
    events = [e async for e in otel.trace(collapsing_agent().stream("Summarise the notes"))]
    spans = memory.get_finished_spans()

    (run,) = by_operation(spans, "invoke_agent")
    assert run.name == "invoke_agent notes"
    assert run.attributes is not None
    assert run.attributes["gen_ai.conversation.id"] == events[0].run_id
    assert run.attributes["loopwarden.stop_reason"] == "repeated_call"
    assert run.attributes["loopwarden.status"] == "degraded"

    chats = by_operation(spans, "chat")
    model_events = [e for e in events if isinstance(e, ModelCalled)]
    assert len(chats) == len(model_events)
    assert all(c.name == "chat collapser" and c.parent is not None for c in chats)
    assert {c.parent.span_id for c in chats if c.parent} == {run.context.span_id}
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats if c.attributes) == sum(
        e.usage.prompt_tokens for e in model_events
    )
    assert run.attributes["gen_ai.usage.input_tokens"] == sum(e.usage.prompt_tokens for e in model_events)

    tools = by_operation(spans, "execute_tool")
    proposed = [e for e in events if isinstance(e, ToolCallProposed)]
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools if t.attributes] == [e.call_id for e in proposed]
    assert all(t.name == "execute_tool read_file" for t in tools)
    failed = [t for t in tools if t.status.status_code == StatusCode.ERROR]
    # the missing file, and the call the guard stopped instead of running
    assert [t.attributes["error.type"] for t in failed if t.attributes] == ["exception", "repeated_call"]
    verdicts = [ev for t in tools for ev in t.events if ev.name == "loopwarden.guard_verdict"]
    assert any(ev.attributes and ev.attributes["loopwarden.action"] == "stopped" for ev in verdicts)
    for span in (*chats, *tools):
        assert span.start_time is not None and span.end_time is not None and span.start_time <= span.end_time


async def test_a_stored_trace_exports_the_same_spans(exporter: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    memory, provider = exporter
    run = await collapsing_agent().run("x")
    OtelTracer(provider.get_tracer("test")).export_events(run.events)
    spans = memory.get_finished_spans()
    assert len(by_operation(spans, "invoke_agent")) == 1
    assert len(by_operation(spans, "chat")) == run.totals.model_calls
    assert len(by_operation(spans, "execute_tool")) == run.totals.tool_calls_proposed


async def test_a_trace_cut_short_ends_its_spans_as_errors(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    memory, provider = exporter
    run = await collapsing_agent().run("x")
    cut = [e for e in run.events if e.type != "run_finished"][:4]  # ends between a call and its result
    OtelTracer(provider.get_tracer("test")).export_events(cut)
    spans = memory.get_finished_spans()
    assert spans and all(s.status.status_code == StatusCode.ERROR for s in spans if s.name != "chat collapser")
