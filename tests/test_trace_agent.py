"""Every run traced: `Agent(trace=...)` and LOOPWARDEN_TRACE_DB keep each run's events, status
and model exchanges in a real SQLite run store, also when the run raises or is cancelled."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from loopwarden import Agent, FunctionModel, ModelReply, ModelRequest, tool
from loopwarden.events import Event, RunFinished
from loopwarden.models.base import ModelError
from loopwarden.models.cassette import RecordingModel
from loopwarden.models.scripted import ScriptedModel, call
from loopwarden.trace.exchanges import cassette_for_run, exchange_rows, load_exchanges
from loopwarden.trace.store import RunStore
from loopwarden.trace.tracing import TRACE_DB_ENV, Tracer
from trace_fixtures import collapsing_agent, read_file


def _dumps(events: list[Event]) -> list[dict[str, Any]]:
    return [e.model_dump() for e in events]


def reader_model() -> ScriptedModel:
    return ScriptedModel([call("read_file", {"path": "a.txt"}), call("read_file", {"path": "b.txt"}), "alpha, beta."])


async def test_a_traced_run_keeps_every_event_in_order_with_its_status(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    model = reader_model()
    run = await Agent(model, [read_file], trace=str(db)).run("Read a and b", run_id="r1")
    store = RunStore(db)
    assert _dumps(store.events("r1")) == _dumps(run.events)
    assert [e.seq for e in store.events("r1")] == list(range(1, len(run.events) + 1))
    record = store.get_run("r1")
    assert record.status == run.status == "completed" and record.stop_reasons == [run.stop_reason]
    assert record.kind == "agent" and record.params["tools"] == ["read_file"]
    assert record.totals is not None and record.totals["model_calls"] == 3
    # What the model was sent and what it answered, call by call.
    exchanges = load_exchanges(store, "r1")
    assert [x.request for x in exchanges] == model.requests
    assert [x.reply.text if x.reply else None for x in exchanges] == [None, None, "alpha, beta."]
    assert [len(x.request.messages) for x in exchanges] == [1, 3, 5]


async def test_every_run_of_an_agent_is_its_own_row_and_a_store_or_sink_also_works(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    agent = collapsing_agent()
    agent = Agent(agent.model, [read_file], checklist=agent.checklist, trace=store)
    first, second = await agent.run("x"), await agent.run("y")
    assert first.run_id != second.run_id
    for run in (first, second):
        assert _dumps(store.events(run.run_id)) == _dumps(run.events)
        assert store.get_run(run.run_id).status == run.status == "degraded"
        assert len(load_exchanges(store, run.run_id)) == run.totals.model_calls
    seen: list[Event] = []
    run = await Agent(reader_model(), [read_file], trace=seen.append).run("Read a and b")
    assert _dumps(seen) == _dumps(run.events)
    awaited: list[str] = []

    async def slow_sink(event: Event) -> None:
        await asyncio.sleep(0)
        awaited.append(event.type)

    run = await Agent(reader_model(), [read_file], trace=slow_sink).run("Read a and b")
    assert awaited == [e.type for e in run.events]


async def test_a_model_raising_something_unexpected_leaves_its_events_and_a_failed_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    model = ScriptedModel([call("read_file", {"path": "a.txt"}), RuntimeError("the SDK broke")])
    with pytest.raises(RuntimeError, match="the SDK broke"):
        await Agent(model, [read_file], trace=db).run("Read a", run_id="boom")
    store = RunStore(db)
    record = store.get_run("boom")
    assert record.status == "failed" and "RuntimeError: the SDK broke" in record.message
    types = [e.type for e in store.events("boom")]
    assert types[0] == "run_started" and "model_called" in types and types[-1] == "tool_call_finished"
    assert not any(isinstance(e, RunFinished) for e in store.events("boom"))
    exchanges = load_exchanges(store, "boom")
    assert len(exchanges) == 2 and exchanges[0].reply is not None
    assert exchanges[1].error is not None and exchanges[1].error.kind == "RuntimeError"


async def test_a_model_error_is_kept_as_an_exchange_and_the_run_ends_with_its_status(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    model = ScriptedModel([ModelError("auth", "key rejected", status=401)])
    run = await Agent(model, [read_file], trace=store).run("Read a")
    assert store.get_run(run.run_id).status == run.status
    (exchange,) = load_exchanges(store, run.run_id)
    assert exchange.error is not None and (exchange.error.kind, exchange.error.status) == ("auth", 401)
    (stored,) = exchange_rows(store, run.run_id)
    assert stored["error"] == exchange.error.model_dump_json()  # as model_dump_json() writes it


async def test_a_cancelled_run_keeps_its_events_and_is_cancelled(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait for something that never comes."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    agent = Agent(ScriptedModel([call("wait_forever")]), [wait_forever], trace=db)
    task = asyncio.create_task(agent.run("wait", run_id="c1"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    store = RunStore(db)
    assert store.get_run("c1").status == "cancelled"
    types = [e.type for e in store.events("c1")]
    assert (
        types[:2] == ["run_started", "model_called"]
        and "tool_call_proposed" in types
        and "tool_call_finished" not in types
    )


def waiting_reader_model() -> FunctionModel:
    """The reader as a real client behaves: it waits on the event loop for every reply."""
    script = reader_model()

    async def reply(request: ModelRequest) -> ModelReply:
        await asyncio.sleep(0)
        return await script.complete(request)

    return FunctionModel(reply)


async def test_a_stream_left_unread_ends_cancelled_not_running(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    agent = Agent(waiting_reader_model(), [read_file], trace=store)
    seen: list[str] = []
    async with aclosing(agent.stream("Read a and b", run_id="left")) as events:
        async for event in events:
            seen.append(event.type)
            if event.type == "tool_call_finished":
                break
    # The run waited for the model's next reply after that result: it ends there, cancelled.
    assert store.get_run("left").status == "cancelled"
    assert [e.type for e in store.events("left")] == seen


async def test_a_consumer_never_sees_an_event_the_store_does_not_have(tmp_path: Path) -> None:
    # An instant model and quick tools never make the run wait: its events are committed in
    # batches, each before the consumer gets any of it. A consumer that stops early may leave
    # more in the store than it saw (the run got that far), never less, and the run row agrees.
    store = RunStore(tmp_path / "runs.db")
    other = sqlite3.connect(store.path)  # a reader of its own, as another process would be
    cuts = ("run_started", "model_called", "tool_call_proposed", "guard_verdict", "tool_call_finished", "run_finished")
    for cut in cuts:
        run_id = f"cut-{cut}"
        seen: list[Event] = []
        async with aclosing(Agent(reader_model(), [read_file], trace=store).stream("Read", run_id=run_id)) as events:
            async for event in events:
                seen.append(event)
                last_seq, status = other.execute("SELECT last_seq, status FROM runs WHERE id = ?", (run_id,)).fetchone()
                assert last_seq >= event.seq  # committed before it was streamed
                if isinstance(event, RunFinished):
                    assert status == event.status  # and so is how it ended
                if event.type == cut:
                    break
        stored = store.events(run_id)
        assert _dumps(stored[: len(seen)]) == _dumps(seen)
        finished = isinstance(stored[-1], RunFinished)
        assert store.get_run(run_id).status == (stored[-1].status if finished else "cancelled")  # type: ignore[attr-defined]
    other.close()


async def test_the_environment_traces_agents_built_while_it_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "env" / "runs.db"
    monkeypatch.delenv(TRACE_DB_ENV, raising=False)
    built_before = Agent(reader_model(), [read_file])
    monkeypatch.setenv(TRACE_DB_ENV, str(db))
    traced = Agent(reader_model(), [read_file])
    opted_out = Agent(reader_model(), [read_file], trace=False)
    assert isinstance(traced.trace, Tracer) and built_before.trace is False and opted_out.trace is False
    await built_before.run("Read a and b", run_id="before")
    await opted_out.run("Read a and b", run_id="out")
    run = await traced.run("Read a and b", run_id="env")
    store = RunStore(db)
    assert _dumps(store.events("env")) == _dumps(run.events)
    assert store.get_run("env").status == "completed"
    assert store.find_run("before") is None and store.find_run("out") is None
    monkeypatch.setenv(TRACE_DB_ENV, str(tmp_path))  # a folder cannot hold a store: said when built
    with pytest.raises(ValueError, match=TRACE_DB_ENV):
        Agent(reader_model(), [read_file])


async def test_a_resumed_run_is_traced_under_its_own_id(tmp_path: Path) -> None:
    from loopwarden.policy.approval import PendingApproval

    @tool(requires_approval=True)
    def delete_note(path: str) -> str:
        """Delete a note.

        Args:
            path: file name
        """
        return f"deleted {path}"

    store = RunStore(tmp_path / "runs.db")
    agent = Agent(ScriptedModel([call("delete_note", {"path": "a.txt"}), "deleted."]), [delete_note], trace=store)
    paused = await agent.run("Delete a", run_id="p1")
    assert paused.status == "paused" and store.get_run("p1").status == "paused"
    pending = PendingApproval.model_validate(paused.output)
    resumed = [e async for e in agent.resume(pending, {pending.calls[0].call_id: True})]
    assert store.get_run("p1").status == "completed"
    assert _dumps(store.events("p1")[len(paused.events) :]) == _dumps(
        [e.model_copy(update={"seq": e.seq + len(paused.events)}) for e in resumed]
    )


async def test_stored_exchanges_are_the_cassette_a_recording_model_would_write(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    recording = RecordingModel(collapsing_agent().model)
    base = collapsing_agent()
    run = await Agent(recording, [read_file], checklist=base.checklist, trace=store).run("x")
    cassette = cassette_for_run(store, run.run_id)
    assert cassette.model == "collapser" and cassette.interactions == recording.cassette.interactions
    # The replies are stored as model_dump_json() writes them, byte for byte (written by the serializer).
    stored = exchange_rows(store, run.run_id)
    assert [row["reply"] for row in stored] == [
        x.reply.model_dump_json() for x in recording.cassette.interactions if x.reply
    ]
    with pytest.raises(ValueError, match="no model calls"):
        cassette_for_run(store, "unknown")


async def test_a_traced_run_imports_as_a_case_that_replays(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from loopwarden.cli import build_app
    from loopwarden.eval.case import load_case
    from loopwarden.eval.runner import run_case

    db = tmp_path / "runs.db"
    base = collapsing_agent()
    run = await Agent(base.model, [read_file], checklist=base.checklist, trace=db).run("Summarise", run_id="bad")
    app, cli = build_app(), CliRunner()
    out = tmp_path / "cases" / "bad.yaml"
    out.parent.mkdir()
    imported = cli.invoke(app, ["eval-import", "bad", "--db", str(db), "-o", str(out)])
    assert imported.exit_code == 0, imported.output
    assert (out.parent / "bad.cassette.json").is_file()
    result = await run_case(load_case(out))
    # Same runtime, same replies: the replay ends where the traced run did, after as many calls.
    assert not any(r.startswith("crashed") for r in result.reasons), result.reasons
    assert (result.stop_reason, result.model_calls) == (run.stop_reason, run.totals.model_calls)
    assert result.tool_executions == run.totals.tool_executions
    shown = cli.invoke(app, ["trace", "show", "bad", "--db", str(db)])
    assert shown.exit_code == 0 and "repeated_call" in shown.output
    for bad_args in (
        ["eval-import", "nope", "--db", str(db), "-o", str(out)],
        ["eval-import", "bad", "--db", str(out), "-o", str(out)],
    ):
        refused = cli.invoke(app, bad_args)
        assert refused.exit_code == 2 and "cannot import" in refused.output
