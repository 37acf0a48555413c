"""Keep every event of a run in the run store, each committed before it is streamed.

    recorder = TraceRecorder(RunStore("runs.db"))
    async for event in recorder.record(agent.stream("question")):
        ...                                    # events pass through unchanged

Events are committed in batches (trace/writer.py): the events a run tells before it next waits
on anything (a model reply, a tool running in a thread, a person's approval) go to the store in
one transaction, with the model exchanges of that stretch, and only then reach the consumer.
So a consumer sees nothing the store does not have; a consumer that stops reading may leave in
the store a few events it did not get to (the rest of that stretch, quick inline tools included).

The run row is created with the first batch and closed with the final status, stop reason and
totals in the transaction of the last (`run_finished`'s); a stream that raises, is cancelled or
is left unread leaves the run `failed` or `cancelled` with every event up to that point kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..events import Event, RunFinished, RunStarted
from .rows import open_run, update_status
from .store import RunNotFound, RunStatus, RunStore
from .writer import Rest, Row, RunWriter, next_now


class TraceRecorder:
    def __init__(
        self,
        store: RunStore,
        *,
        kind: str = "agent",
        params: dict[str, Any] | None = None,
        writer: RunWriter | None = None,
    ) -> None:
        self.store = store
        self.kind = kind
        self.params = dict(params or {})
        self.writer = writer
        """Shared with the run's TracedModel, so its exchanges join the events' transactions."""
        self.on_done: Callable[[], object] | None = None
        """Called once the recording has ended, however it ended."""

    async def record(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        writer: RunWriter | None = None
        finished = False
        rest: Rest[Event] | None = None
        try:
            while True:
                try:
                    event, rest = next_now(events)
                    if rest is not None:  # the run waits: what it told so far goes out first
                        if writer is not None:
                            for ready in await writer.flush():
                                yield ready
                        waiting, rest = rest, None  # a cancellation from here on reaches it through the await
                        event = await waiting
                except StopAsyncIteration:
                    break
                assert event is not None
                if writer is None:
                    writer = self.writer or RunWriter(self.store, event.run_id)
                    writer.run_id = event.run_id
                    writer.open(self._opening(event))  # the run row, in the first batch's transaction
                writer.events.append(event)
                if isinstance(event, RunFinished):
                    # The run row says how it ended in the last events' transaction, before anyone is told.
                    writer.closing = _closing(event)
                    ready_events = await writer.flush()
                    finished = True
                    for ready in ready_events:
                        yield ready
                elif writer.full:
                    for ready in await writer.flush():
                        yield ready
            if writer is not None:
                for ready in await writer.flush():
                    yield ready
        except (asyncio.CancelledError, GeneratorExit):
            # GeneratorExit: the consumer stopped reading mid-run (break, aclose): the run ends there.
            if rest is not None:
                await rest.cancel()
            if writer is not None and not finished:
                writer.closing = _status(writer.run_id, "cancelled", message="the run was cancelled")
                writer.flush_now()
            raise
        except Exception as error:
            if writer is not None and not finished:
                writer.closing = _status(writer.run_id, "failed", message=f"{type(error).__name__}: {error}")
                writer.flush_now()
            raise
        finally:
            if self.on_done is not None:
                self.on_done()

    def _opening(self, first: Event) -> Row:
        params = dict(self.params)
        if isinstance(first, RunStarted):
            params.setdefault("intent", first.intent)
            params.setdefault("model", first.model)
            params.setdefault("tools", first.tools)
        run_id, kind = first.run_id, self.kind
        return lambda tx: open_run(tx, run_id, kind=kind, params=params)


def _closing(last: RunFinished) -> Row:
    return _status(
        last.run_id,
        last.status,
        stop_reasons=[last.stop_reason],
        totals=last.totals.model_dump(),
        message=str(last.output)[:500] if last.output is not None else "",
    )


def _status(run_id: str, status: RunStatus, **fields: Any) -> Row:
    def write(tx: Any) -> None:
        if update_status(tx, run_id, status, **fields) == 0:
            raise RunNotFound(run_id)

    return write
