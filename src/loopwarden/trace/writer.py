"""How a traced run reaches the run store: in batches, each committed before any of its events
is streamed.

A run tells its events in bursts: everything between two waits (on the model, on a tool in a
thread, on a person's approval) is computed at once. `RunWriter` keeps a burst's events and the
model exchanges that came with them, and `flush()` commits them in one transaction: on the
event loop's own thread when no other writer holds the store (a commit takes tens of
microseconds; no lock is ever waited for there), else in a worker thread. `next_now()` is how
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
"""Writes rows inside the open transaction it is given (a model exchange, say)."""

MAX_BATCH = 64
"""Events kept at most before a commit, however long a run goes without waiting."""
THREAD_EVERY = 64
"""Every this many inline commits one goes through a worker thread, whose connection runs the
WAL checkpoints the event loop's connection leaves alone."""


class RunWriter:
    """A run's rows waiting for their transaction, and the commit that makes them durable."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.events: list[Event] = []
        self.rows: list[Row] = []
        self._inline_commits = 0

    @property
    def full(self) -> bool:
        return len(self.events) >= MAX_BATCH

    def add_rows(self, rows: Row) -> None:
        self.rows.append(rows)

    async def flush(self) -> list[Event]:
        """Commit what is pending; returns the events now durable, in order."""
        events, rows = self.events, self.rows
        if not events and not rows:
            return []
        self.events, self.rows = [], []
        with_rows = _all(rows) if rows else None
        may_inline = self._inline_commits < THREAD_EVERY - 1
        if may_inline and self.store.append_events(self.run_id, events, with_rows=with_rows, wait=False) is not None:
            self._inline_commits += 1
            return events
        self._inline_commits = 0
        await asyncio.to_thread(self.store.append_events, self.run_id, events, with_rows=with_rows)
        return events

    def flush_now(self) -> None:
        """Commit what is pending from a run that is ending badly (waits if it must)."""
        events, rows = self.events, self.rows
        self.events, self.rows = [], []
        if events or rows:
            self.store.append_events(self.run_id, events, with_rows=_all(rows) if rows else None)


def _all(rows: list[Row]) -> Row:
    def write(tx: Any) -> None:
        for write_rows in rows:
            write_rows(tx)

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
