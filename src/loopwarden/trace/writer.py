"""How a traced run reaches the run store: in batches, each committed before any of its events
is streamed.

A run tells its events in bursts: everything between two waits (on the model, on a tool in a
thread, on a person's approval) is computed at once. `RunWriter` keeps a burst's events and the
model exchanges that came with them, and `flush()` commits them in one transaction: on the
event loop's own thread when no other writer holds the store (a commit takes tens of
microseconds; no lock is ever waited for there, and no WAL checkpoint runs there: see
trace/checkpoint.py), else in a worker thread. The run's row is made running in the first of
these transactions and given its final status in the last. `next_now()` is how
the recorder knows a burst has ended: it steps the run to its next event and reports whether it
got there without waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from typing import Any, Generic, TypeVar

from ..events import Event
from .store import RunStore

T = TypeVar("T")
Row = Callable[[Any], None]
"""Writes rows inside the open transaction it is given (the run's row, say)."""
ExchangeRow = Callable[[Any], tuple[Any, ...]]
"""A model exchange's row (its values in INSERT_EXCHANGE's order), given the open transaction."""

INSERT_EXCHANGE = (
    "INSERT INTO model_exchanges (run_id, n, base, prefix, model, request, reply, error, ts)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

MAX_BATCH = 256
"""Events kept at most before a commit, however long a run goes without waiting (a run that
never waits is one whose model and tools answer at once: it finishes before anyone could watch
its events one by one; fewer, larger commits write fewer pages)."""


class RunWriter:
    """A run's rows waiting for their transaction, and the commit that makes them durable.

    `opening` and `closing` (the run row made running, its final status) go in the same
    transaction as the first and the last events: a run costs no transaction of its own."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.events: list[Event] = []
        self.rows: list[Row] = []
        self.exchanges: list[ExchangeRow] = []
        """Inserted with one executemany after `rows` (the run's row is written by then)."""
        self.opening: Row | None = None
        self.closing: Row | None = None
        self.opened = False
        """Whether the run's row is written or will be, before any row of this writer."""
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
            row = tx.execute("SELECT COALESCE(MAX(n), 0) FROM model_exchanges WHERE run_id = ?", (self.run_id,))
            self._exchanges = int(row.fetchone()[0])
        self._exchanges += 1
        return self._exchanges

    def _take(self) -> tuple[list[Event], Row | None]:
        events, rows, exchanges = self.events, self.rows, self.exchanges
        if self.opening is not None:
            rows.insert(0, self.opening)
        if self.closing is not None:
            rows.append(self.closing)
        self.events, self.rows, self.exchanges, self.opening, self.closing = [], [], [], None, None
        return events, _all(rows, exchanges) if rows or exchanges else None

    async def flush(self) -> list[Event]:
        """Commit what is pending; returns the events now durable, in order."""
        events, with_rows = self._take()
        if not events and with_rows is None:
            return []
        try:
            if self.store.append_events(self.run_id, events, with_rows=with_rows, wait=False) is not None:
                return events
            await asyncio.to_thread(self.store.append_events, self.run_id, events, with_rows=with_rows)
        except BaseException:
            self._exchanges = None  # rolled back: read again at the next exchange
            raise
        return events

    def flush_now(self) -> None:
        """Commit what is pending from a run that is ending badly (waits if it must)."""
        events, with_rows = self._take()
        if events or with_rows is not None:
            self._exchanges = None
            self.store.append_events(self.run_id, events, with_rows=with_rows)


def _all(rows: list[Row], exchanges: list[ExchangeRow]) -> Row:
    def write(tx: Any) -> None:
        for write_rows in rows:
            write_rows(tx)
        if exchanges:  # one statement for a stretch's exchanges, not one per model call
            tx.executemany(INSERT_EXCHANGE, [row(tx) for row in exchanges])

    return write


def next_now(events: AsyncIterator[T]) -> tuple[T, None] | tuple[None, Rest[T]]:
    """Step `events` to its next item. (item, None) when it got there without waiting on
    anything; otherwise (None, rest), where awaiting `rest` waits exactly as `anext(events)`
    would have (it has started, and is suspended at its first wait). StopAsyncIteration and the
    stream's exceptions propagate from here or from awaiting `rest`."""
    step: Any = events.__anext__()  # an async generator's is a coroutine-like awaitable (send, throw, close)
    try:
        waiting_on = step.send(None)
    except StopIteration as done:
        return done.value, None
    return None, Rest(step, waiting_on)


class Rest(Generic[T]):
    """The rest of a step that stopped to wait: awaiting it hands the event loop what the step
    waits on and passes every wake-up (or cancellation) on to it."""

    def __init__(self, step: Coroutine[Any, Any, T], waiting_on: Any) -> None:
        self.step, self.waiting_on = step, waiting_on

    def __await__(self) -> Generator[Any, Any, T]:
        waiting_on = self.waiting_on
        while True:
            try:
                sent = yield waiting_on
            except GeneratorExit:
                self.step.close()
                raise
            except BaseException as error:  # a cancellation: the step gets it where it waits
                try:
                    waiting_on = self.step.throw(error)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
                continue
            try:
                waiting_on = self.step.send(sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]

    async def cancel(self) -> None:
        """End the step as a cancellation where it waits (its clean-up runs), whatever it does."""
        try:
            self.waiting_on = self.step.throw(asyncio.CancelledError())
        except BaseException:  # it ended: cancelled, stopped, or raised on its way out
            return
        try:
            await self
        except BaseException:
            return
