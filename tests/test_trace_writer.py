"""The trace writer commits a run's events in batches on the event loop's thread when the store
is free, and in a worker thread when another writer holds it: the event loop never waits on a lock."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from loopwarden.events import EventStamper, NudgeInjected, RunFinished, Totals
from loopwarden.trace.store import RunStore
from loopwarden.trace.writer import FIRST, TOLD, Pump, RunWriter, ends


def _nudges(run_id: str, n: int) -> list[NudgeInjected]:
    stamp = EventStamper(run_id)
    return [stamp(NudgeInjected, turn=i, detector="cycle", text=f"nudge {i}") for i in range(n)]


async def test_a_batch_is_one_transaction_numbered_in_order(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    store.create_run(run_id="r")
    writer = RunWriter(store, "r")
    writer.events += _nudges("r", 5)
    written: list[int] = []
    writer.add_rows(lambda tx: written.append(tx.execute("SELECT last_seq FROM runs WHERE id = 'r'").fetchone()[0]))
    flushed = await writer.flush()
    assert [e.seq for e in flushed] == [1, 2, 3, 4, 5] and written == [0]  # the rows went first, same transaction
    assert [e.seq for e in store.events("r")] == [1, 2, 3, 4, 5] and store.last_seq("r") == 5
    assert await writer.flush() == []


async def test_a_store_held_by_another_writer_is_waited_for_off_the_event_loop(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = RunStore(db)
    store.create_run(run_id="r")
    writer = RunWriter(store, "r")
    writer.events += _nudges("r", 3)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing
    flush = asyncio.create_task(writer.flush())
    ticks = 0
    for _ in range(50):  # the loop keeps turning while the flush waits in its thread
        await asyncio.sleep(0)
        ticks += 1
    assert ticks == 50 and not flush.done() and store.last_seq("r") == 0
    holder.execute("COMMIT")
    assert [e.seq for e in await flush] == [1, 2, 3]
    assert store.last_seq("r") == 3


async def test_the_pump_stops_after_the_first_event_where_the_run_waits_at_a_full_batch_and_at_the_end() -> None:
    gate = asyncio.Event()
    finished = EventStamper("r")(RunFinished, status="completed", stop_reason="final_answer", totals=Totals())

    async def stream() -> AsyncIterator[object]:
        yield "first"
        yield "ready"
        await gate.wait()
        for i in range(5):
            yield i
        yield finished
        yield "after the end"

    told: list[object] = []
    pump = Pump(stream(), told, 3)
    assert pump.step() is FIRST and told == ["first"]
    waits_on = pump.step()
    assert waits_on not in (FIRST, TOLD) and told == ["first", "ready"]  # the wait has not begun
    told.clear()
    asyncio.get_running_loop().call_soon(gate.set)
    assert await pump.resume(waits_on) is TOLD and told == [0, 1, 2]  # awaited as the run would
    told.clear()
    assert pump.step() is TOLD and told == [3, 4, finished]  # run_finished ends a batch however short
    told.clear()
    with pytest.raises(StopAsyncIteration):
        pump.step()
    assert told == ["after the end"]  # what came before the end is the caller's to commit


class LastOfAPhase(RunFinished):
    """A run's last event of a class of its own."""


async def test_the_pump_ends_a_batch_at_a_run_finished_of_any_class_and_only_there() -> None:
    stamp = EventStamper("r")
    last = stamp(LastOfAPhase, status="completed", stop_reason="final_answer", totals=Totals())

    async def stream() -> AsyncIterator[object]:
        yield "first"
        for event in [*_nudges("r", 2), last, *_nudges("r", 2)]:
            yield event

    told: list[object] = []
    pump = Pump(stream(), told, 256)
    assert pump.step() is FIRST
    assert pump.step() is TOLD and len(told) == 4 and told[-1] is last  # "first", two nudges, the last
    assert [ends(e) for e in told] == [False, False, False, True]
    assert not ends(_nudges("r", 1)[0]) and ends(stamp(RunFinished, status="failed", stop_reason="x", totals=Totals()))


async def test_a_pump_cancelled_where_the_run_waits_runs_its_clean_up() -> None:
    cleaned: list[str] = []

    async def stream() -> AsyncIterator[str]:
        yield "first"
        try:
            await asyncio.Event().wait()
            yield "never"
        finally:
            await asyncio.sleep(0)  # clean-up that waits too
            cleaned.append("done")

    pump = Pump(stream(), [], 256)
    assert pump.step() is FIRST
    assert pump.step() not in (FIRST, TOLD)
    await pump.cancel()
    assert cleaned == ["done"]


async def test_a_store_locked_while_the_event_loop_connection_opens_is_waited_for_off_the_event_loop(
    tmp_path: Path,
) -> None:
    # The last connection to a store to close checkpoints and deletes the log under an exclusive
    # lock on the file (the checkpoint thread's, between two runs, say): a connection opened
    # meanwhile cannot even read. The event loop's connection, opened at a run's first commit,
    # must not fail the run then: the commit waits in a worker thread like any held store.
    db = tmp_path / "runs.db"
    store = RunStore(db)
    store.create_run(run_id="r")
    store.close()  # no connection of the store open: the next commit opens the event loop's
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # the whole file, as a closing last connection holds it
    writer = RunWriter(store, "r")
    writer.events += _nudges("r", 2)
    flush = asyncio.create_task(writer.flush())
    for _ in range(50):  # the loop keeps turning while the flush waits in its thread
        await asyncio.sleep(0)
    assert not flush.done()
    holder.execute("COMMIT")
    holder.close()
    assert [e.seq for e in await flush] == [1, 2]
    assert store.last_seq("r") == 2
