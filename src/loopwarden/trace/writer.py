"""How a traced run reaches the run store: in batches, each committed before any of its events
is streamed.

A run tells its events in bursts: everything between two waits (on the model, on a tool in a
thread, on a person's approval) is computed at once. `RunWriter` keeps a burst's events and the
model exchanges that came with them, and `flush()` commits them in one transaction: on the
event loop's own thread when no other writer holds the store (a commit takes tens of
microseconds; no lock is ever waited for there, and no WAL checkpoint runs there: see
trace/checkpoint.py), else in a worker thread. The run's row is made running in the first of
these transactions and given its final status in the last. `Pump` is how the recorder knows a
burst has ended: it steps the run through its events and stops where the run would wait.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, TypeGuard, TypeVar

from ..events import RunFinished
from ..hotpath.kept import Told
from .rows import last_exchange
from .store import RunStore

T = TypeVar("T")
Row = Callable[[Any], None]
"""Writes rows inside the open transaction it is given (the run's row, say)."""
ExchangeRow = Callable[[Any], tuple[int, str]]
"""A model exchange's number and line (trace/rows.py exchange_line), given the open transaction."""

MAX_BATCH = 256
"""Events kept at most before a commit, however long a run goes without waiting (a run that
never waits is one whose model and tools answer at once: it finishes before anyone could watch
its events one by one; fewer, larger commits write fewer pages)."""
KEPT_BATCH = 1024
"""`MAX_BATCH` for a run whose events nobody reads before its end (a traced `Agent.run`: the
recorder is given the run's stamper, trace/recorder.py), counted in kept items (a call's three
events kept as one, hotpath/kept.py). Such a run holds all its events until its result anyway,
so a larger batch costs no memory, and no one is kept waiting for the first ones: a run of a few
hundred steps that never waits commits once, not every 256 events (each
commit rewrites the run's row, the header page and the last pages of the b-trees it adds to,
and takes the locks again; ~0.1 ms of a 100-call run, bench/README.md, 4 December 2026)."""


class RunWriter:
    """A run's rows waiting for their transaction, and the commit that makes them durable.

    `opening` and `closing` (the run row made running, its final status) go in the same
    transaction as the first and the last events: a run costs no transaction of its own."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.events: list[Told] = []
        """Events, and step events a run kept as their dicts (trace/lines.py writes either)."""
        self.rows: list[Row] = []
        self.exchanges: list[ExchangeRow] = []
        """Written in the row of the events they are committed with (after `rows`: the run's row
        is written by then)."""
        self.opening: Row | None = None
        self.closing: Row | None = None
        self.opened = False
        """Whether the run's row is written or will be, before any row of this writer."""
        self.ended = False
        """Whether the run's last event (run_finished) is among `events` or committed."""
        self._exchanges: int | None = None  # the run's last model exchange number, once read

    @property
    def full(self) -> bool:
        return len(self.events) >= MAX_BATCH

    def add_rows(self, rows: Row) -> None:
        self.rows.append(rows)

    def open(self, rows: Row) -> None:
        """Write the run's row (`rows`) first, in the transaction of the next flush."""
        self.opening, self.opened = rows, True

    def next_exchange(self, tx: Any) -> int:
        """The number of the run's next model exchange (read from the store once per writer:
        every model of the run writes its exchanges through this writer)."""
        if self._exchanges is None:
            self._exchanges = last_exchange(tx, self.run_id)
        self._exchanges += 1
        return self._exchanges

    def _take(self) -> tuple[list[Told], Row | None, list[ExchangeRow]]:
        events, rows, exchanges = self.events, self.rows, self.exchanges
        if self.opening is not None:
            rows.insert(0, self.opening)
        if self.closing is not None:
            rows.append(self.closing)
        self.events, self.rows, self.exchanges, self.opening, self.closing = [], [], [], None, None
        return events, _all(rows) if rows else None, exchanges

    async def flush(self) -> list[Told]:
        """Commit what is pending; returns the events now durable, in order."""
        events, with_rows, exchanges = self._take()
        if not events and with_rows is None and not exchanges:
            return []
        store, run_id = self.store, self.run_id
        try:
            if store.append_events(run_id, events, with_rows=with_rows, exchanges=exchanges, wait=False) is not None:
                return events
            await asyncio.to_thread(store.append_events, run_id, events, with_rows=with_rows, exchanges=exchanges)
        except BaseException:
            self._exchanges = None  # rolled back: read again at the next exchange
            raise
        return events

    def flush_now(self) -> None:
        """Commit what is pending from a run that is ending badly (waits if it must)."""
        events, with_rows, exchanges = self._take()
        if events or with_rows is not None or exchanges:
            self._exchanges = None
            self.store.append_events(self.run_id, events, with_rows=with_rows, exchanges=exchanges)


def _all(rows: list[Row]) -> Row:
    def write(tx: Any) -> None:
        for write_rows in rows:
            write_rows(tx)

    return write


TOLD = object()
"""What `Pump` stops at when the run told a batch's worth of events, or its last."""
FIRST = object()
"""What `Pump` stops at after the run's first event (its row can be written with the next batch:
the model exchanges that come before that batch then join its transaction)."""


class Pump:
    """Steps a run's events into `told` until the run waits on something (a model reply, a tool
    in a thread, a person), has told `most` events, or has told its last (run_finished); and
    once after its first event (FIRST).

    `step()` and `await resume(waits_on)` return TOLD, FIRST or what the run waits on: that wait
    has not begun to be awaited, so what it told can be committed and streamed first, and then
    `resume` awaits it exactly as the run would have. StopAsyncIteration and the run's
    exceptions propagate from either. The events come through `yield from`, so an event told
    without waiting costs no Python-level exception (stepping the run by hand, `send()` on each
    `__anext__()`, raised and caught a StopIteration per event: ~1.6 M instructions a run of
    400 events)."""

    def __init__(self, events: AsyncIterator[Any], told: list[Any], most: int) -> None:
        self.run = _pump(events, told, most)

    def step(self) -> object:
        return self.run.send(None)

    def resume(self, waits_on: object) -> Resume:
        return Resume(self.run, waits_on)

    async def cancel(self) -> None:
        """End the run as a cancellation where it waits (its clean-up runs), whatever it does."""
        try:
            said = self.run.throw(asyncio.CancelledError())
            while said is not TOLD and said is not FIRST:
                said = await Resume(self.run, said)
        except BaseException:  # it ended: cancelled, stopped, or raised on its way out
            return


_FINAL: dict[type, bool] = {}
"""Per event class: whether it is a RunFinished. `isinstance` with a pydantic class that fails
(every event but the last) goes through the metaclass's `__instancecheck__` and reads the
instance's `__class__` through pydantic's `__getattr__` hook: ~600 instructions an event more
than this dict (callgrind, a run's 403 events)."""


def ends(event: object) -> TypeGuard[RunFinished]:
    """Whether `event` is a run's last (a RunFinished)."""
    cls = type(event)
    final = _FINAL.get(cls)
    if final is None:
        if len(_FINAL) >= 256:  # event classes made at run time: kept at most this many
            _FINAL.clear()
        final = _FINAL[cls] = issubclass(cls, RunFinished)
    return final


@types.coroutine
def _pump(events: AsyncIterator[Any], told: list[Any], most: int) -> Generator[object, Any, None]:
    step, final = events.__anext__, _FINAL
    told.append((yield from step()))  # type: ignore[misc]
    yield FIRST
    while True:
        event = yield from step()  # type: ignore[misc]  # types.coroutine: the step may be a coroutine
        told.append(event)
        cls = type(event)
        if len(told) >= most or (final[cls] if cls in final else ends(event)):
            yield TOLD


class Resume:
    """Awaits what the run waits on, as the run would, then steps it on to where it next stops."""

    def __init__(self, run: Generator[object, Any, None], waits_on: object) -> None:
        self.run, self.waits_on = run, waits_on

    def __await__(self) -> Generator[Any, Any, object]:
        try:
            sent = yield self.waits_on
        except GeneratorExit:
            self.run.close()
            raise
        except BaseException as error:  # a cancellation: the run gets it where it waits
            return self.run.throw(error)
        return self.run.send(sent)
