"""JSONL traces and the store recorder: every event of a run kept, read back typed, with the
fields a reviewer needs (intent, tools offered, args hash, result status, checklist, verdicts,
stop reason, usage)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from loopwarden.events import Event, RunFinished, RunStarted, ToolCallFinished, ToolCallProposed
from loopwarden.trace.jsonl import TraceFormatError, export_run, read_jsonl, tee_jsonl, write_jsonl
from loopwarden.trace.recorder import TraceRecorder
from loopwarden.trace.store import RunStore
from loopwarden.trace.summary import summarise_trace
from trace_fixtures import collapsing_agent


async def test_jsonl_round_trip_keeps_every_event_typed(tmp_path: Path) -> None:
    run = await collapsing_agent().run("Summarise the notes")
    path = tmp_path / "trace.jsonl"
    assert write_jsonl(run.events, path) == len(run.events)
    back = read_jsonl(path)
    assert [e.model_dump() for e in back] == [e.model_dump() for e in run.events]
    assert isinstance(back[0], RunStarted) and isinstance(back[-1], RunFinished)
    assert [e.seq for e in back] == list(range(1, len(back) + 1))


async def test_trace_summary_has_the_fields_a_reviewer_needs(tmp_path: Path) -> None:
    run = await collapsing_agent().run("Summarise the notes")
    summary = summarise_trace(run.events)
    assert summary.trace_id == run.run_id
    assert summary.tools_offered[0] == ["read_file"] and summary.max_tools_offered == 1
    first, missing = summary.calls[0], summary.calls[1]
    assert (first.tool, first.status) == ("read_file", "ok")
    assert missing.status == "exception"  # FileNotFoundError became a structured result
    assert first.args_hash != missing.args_hash
    assert any(c.status == "cached" for c in summary.calls)
    assert "repeated_call:stopped" in [v for c in summary.calls for v in c.verdicts]
    assert summary.checklist == {"read_a": True, "read_b": False}
    assert summary.stop_reason == "repeated_call" and summary.status == "degraded"
    assert summary.totals is not None and summary.totals.prompt_tokens > 0
    done = [e for e in run.events if isinstance(e, ToolCallFinished) and e.checklist_done]
    assert [e.checklist_done for e in done] == [["read_a"]]


async def test_recorder_keeps_the_run_in_the_store_and_exports_it(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    recorder = TraceRecorder(store, params={"case": "notes"})
    seen = [e async for e in recorder.record(collapsing_agent().stream("Summarise the notes"))]
    run = store.get_run(seen[0].run_id)
    assert run.status == "degraded" and run.stop_reasons == ["repeated_call"]
    assert run.totals is not None and run.totals["model_calls"] == seen[-1].totals.model_calls  # type: ignore[attr-defined]
    assert run.params["case"] == "notes" and run.params["tools"] == ["read_file"]
    stored = store.events(run.id)
    assert [e.model_dump() for e in stored] == [e.model_dump() for e in seen]
    out = tmp_path / "export.jsonl"
    assert export_run(store, run.id, out) == len(seen)
    assert [json.loads(line)["seq"] for line in out.read_text().splitlines()] == [e.seq for e in seen]


async def test_recorder_marks_a_broken_stream_failed_and_keeps_what_came(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")

    async def breaks() -> AsyncIterator[Event]:
        events = collapsing_agent().stream("x", run_id="broken")
        yield await anext(events)
        yield await anext(events)
        raise RuntimeError("the process died")

    with pytest.raises(RuntimeError):
        async for _ in TraceRecorder(store).record(breaks()):
            pass
    run = store.get_run("broken")
    assert run.status == "failed" and "process died" in run.message
    assert len(store.events("broken")) == 2


async def test_recorder_marks_a_cancelled_run_cancelled(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    started = asyncio.Event()

    async def slow() -> AsyncIterator[Event]:
        events = collapsing_agent().stream("x", run_id="slow")
        yield await anext(events)
        started.set()
        await asyncio.sleep(30)

    async def consume() -> None:
        async for _ in TraceRecorder(store).record(slow()):
            pass

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.get_run("slow").status == "cancelled"


async def test_tee_writes_each_event_as_it_passes(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    count = 0
    async for event in tee_jsonl(collapsing_agent().stream("x"), path):
        count += 1
        assert len(path.read_text().splitlines()) == count  # flushed before the consumer sees it
        assert read_jsonl(path)[-1].seq == event.seq


def test_a_broken_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "x", "run_id": "r", "seq": 1, "ts": 0}\nnot json\n')
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl:2"):
        read_jsonl(path)


async def test_calls_carry_the_hash_of_their_arguments() -> None:
    run = await collapsing_agent().run("x")
    calls = [e for e in run.events if isinstance(e, ToolCallProposed)]
    same = {e.args_hash for e in calls if e.arguments == {"path": "a.txt"}}
    assert len(same) == 1 and len({e.args_hash for e in calls}) == 2


async def test_trace_command_shows_a_file_or_a_stored_run_and_exports(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from loopwarden.cli import build_app

    store = RunStore(tmp_path / "runs.db")
    seen = [e async for e in TraceRecorder(store).record(collapsing_agent().stream("x", run_id="r1"))]
    app, cli = build_app(), CliRunner()
    out = tmp_path / "r1.jsonl"
    exported = cli.invoke(app, ["trace", "export", "r1", "--db", str(tmp_path / "runs.db"), "-o", str(out)])
    assert exported.exit_code == 0 and len(read_jsonl(out)) == len(seen)
    for args in (["trace", "show", str(out)], ["trace", "show", "r1", "--db", str(tmp_path / "runs.db")]):
        shown = cli.invoke(app, args)
        assert shown.exit_code == 0, shown.output
        assert "stop reason: repeated_call" in shown.output
        assert "read_a=done" in shown.output and "read_b=open" in shown.output
        assert "repeated_call:stopped" in shown.output
    missing = cli.invoke(app, ["trace", "export", "nope", "--db", str(tmp_path / "runs.db"), "-o", str(tmp_path / "n")])
    assert missing.exit_code == 2 and not (tmp_path / "n").exists()
    assert cli.invoke(app, ["trace", "show", str(tmp_path / "absent.jsonl")]).exit_code == 2
