"""Resumable Server-Sent Events for one run. Every frame's `id` is the event's sequence number,
read from the store (events are committed before anyone is woken), so a client that reconnects
with `Last-Event-ID: N` gets N+1 onward exactly once, then live events. When the run is over and
everything is sent, an `end` frame (no id) tells the page to close the stream.

The store is read on a small pool of threads, never on the event loop: a read may wait on the
network (the Postgres store) or on a writer's lock (SQLite), and one slow read must not hold up
every other stream, request and heartbeat of the process. The pool also bounds the store
connections SSE holds (each thread keeps its own)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from ..errors import LoopwardenError
from ..trace.records import RunRecord, StoredEvent
from ..trace.store import RunStore
from .runner import RunSignals

MAX_ID_DIGITS = 18  # below 2**63: SQLite's INTEGER range
_DIGITS = re.compile(r"[0-9]+")
BATCH = 200
RETRY_MS = 1000
READ_THREADS = 4
_readers = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="loopwarden-sse")


class BadLastEventId(LoopwardenError, ValueError):
    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def parse_last_event_id(value: str | None, last_seq: int) -> int:
    """The sequence number a client has seen. Missing/empty means from the start; anything that
    is not a plain non-negative decimal number of sane length is refused (400), and a number
    beyond the run's last event (the client did not get it from this server) is refused (409)."""
    if value is None or value.strip() == "":
        return 0
    text = value.strip()
    if len(text) > MAX_ID_DIGITS:
        raise BadLastEventId("Last-Event-ID is too long")
    if not _DIGITS.fullmatch(text):
        raise BadLastEventId("Last-Event-ID must be a non-negative integer (an event sequence number)")
    seq = int(text)
    if seq > last_seq:
        raise BadLastEventId(f"Last-Event-ID {seq} is beyond this run's last event ({last_seq})", status=409)
    return seq


async def run_event_frames(
    store: RunStore, signals: RunSignals, run_id: str, after_seq: int, *, poll_s: float | None = None
) -> AsyncIterator[dict[str, str | int]]:
    """Frames for sse-starlette: stored events after `after_seq`, then live ones, then `end`.
    `poll_s` (default: `signals.poll_s`, as it is at each wait) bounds the wait when nothing
    wakes us (events written by another process)."""
    last = after_seq
    first = True
    loop = asyncio.get_running_loop()
    while True:
        waiter = signals.waiter(run_id)  # before the read: a commit in between still wakes us
        rows, run = await loop.run_in_executor(_readers, _read, store, run_id, last)
        for row in rows:
            # The data is one line of JSON (newlines inside strings are escaped as \n), so no
            # content can end the frame or inject an `id:`/`event:` line.
            frame: dict[str, str | int] = {"id": str(row.seq), "event": "run_event", "data": row.data}
            if first:
                frame["retry"] = RETRY_MS
                first = False
            yield frame
            last = row.seq
        if run is None or (rows and last < run.last_seq):  # a full batch, or more committed since
            continue
        if run.finished and last >= run.last_seq:
            yield {"event": "end", "data": json.dumps({"status": run.status, "last_seq": run.last_seq})}
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter.wait(), timeout=poll_s if poll_s is not None else signals.poll_s)


def _read(store: RunStore, run_id: str, after_seq: int) -> tuple[list[StoredEvent], RunRecord | None]:
    """The next batch of events and, unless the batch is full, the run's row read after it (has
    the run ended? was more committed meanwhile?): one read a wake-up, where reading the events
    again to find none took a second (a third of the stream's queries)."""
    rows = store.event_rows(run_id, after_seq, limit=BATCH)
    return rows, None if len(rows) == BATCH else store.get_run(run_id)
