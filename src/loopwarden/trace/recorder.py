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
from typing import Any, overload

from ..events import Event, EventStamper, RunFinished, RunStarted
from ..hotpath.kept import Told
from .lines import head_of
from .rows import open_run, update_status
from .store import RunNotFound, RunStatus, RunStore
from .writer import FIRST, KEPT_BATCH, MAX_BATCH, TOLD, Pump, Row, RunWriter, ends


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

    @overload
    def record(self, events: AsyncIterator[Event], keep: None = None) -> AsyncIterator[Event]: ...
    @overload
    def record(self, events: AsyncIterator[Event], keep: EventStamper) -> AsyncIterator[list[Told]]: ...
    def record(self, events: AsyncIterator[Event], keep: EventStamper | None = None) -> AsyncIterator[Any]:
        """The run's events, each once committed. With `keep` (the run's stamper; the caller reads
        nothing before the run's end: a traced `Agent.run`), the loop's step events come as their
        dicts (hotpath/kept.py), committed from them (trace/lines.py), and each commit's events
        are passed on as one list."""
        return self._record(events, keep)

    async def _record(self, events: AsyncIterator[Event], keep: EventStamper | None) -> AsyncIterator[Any]:
        writer: RunWriter | None = None
        finished = False
        told: list[Told] = []  # what the run told since it last stopped (Pump appends, and `keep`'s record)
        most = MAX_BATCH if keep is None else KEPT_BATCH  # nobody reads a kept run's events before its end
        if keep is not None:
            # The stamper keeps its step events in `told` as what makes their dicts (hotpath/kept.py),
            # in order with the events the run yields, and builds the one that would make a full
            # batch: the Pump stops there, as when built. The commit writes each from its dict made
            # then (trace/lines.py), and the run's result builds the events only if they are read.
            keep.kept, keep.kept_most, keep.later = told, most - 1, True
        whole = keep is not None  # the caller takes each commit's events as one list (not a yield an event)
        run = Pump(events, told, most)
        said: object = TOLD  # where the run stopped: TOLD, FIRST, what it waits on, or None while awaited
        try:
            while True:
                waits_on, said = said, None  # a cancellation meanwhile reaches the run through the await
                try:
                    stopped = waits_on is TOLD or waits_on is FIRST  # else the run waits on it
                    said = run.step() if stopped else await run.resume(waits_on)
                except StopAsyncIteration:
                    break
                if said is FIRST:  # the run's row is on its way: the model's exchanges go with the events
                    writer = self._writer(told[0])
                    continue
                writer = self._keep(told, writer)
                if writer is not None:  # the run waits, told a batch's worth or ended: what it told goes out first
                    ready_events = await writer.flush()
                    finished = writer.ended
                    for ready in [ready_events] if whole else ready_events:
                        yield ready
            writer = self._keep(told, writer)
            if writer is not None:
                ready_events = await writer.flush()
                for ready in [ready_events] if whole else ready_events:
                    yield ready
        except (asyncio.CancelledError, GeneratorExit):
            # GeneratorExit: the consumer stopped reading mid-run (break, aclose): the run ends there.
            if said is not TOLD and said is not FIRST and said is not None:
                await run.cancel()
            writer = self._keep(told, writer)
            if writer is not None and not finished:
                writer.closing = _status(writer.run_id, "cancelled", message="the run was cancelled")
                writer.flush_now()
            raise
        except Exception as error:
            writer = self._keep(told, writer)
            if writer is not None and not finished:
                writer.closing = _status(writer.run_id, "failed", message=f"{type(error).__name__}: {error}")
                writer.flush_now()
            raise
        finally:
            if self.on_done is not None:
                self.on_done()

    def _keep(self, told: list[Told], writer: RunWriter | None) -> RunWriter | None:
        """Move what the run told to its writer (made, with the run's row, at its first event)."""
        if not told:
            return writer
        writer = writer or self._writer(told[0])
        writer.events += told
        told.clear()
        last = writer.events[-1]
        if ends(last):
            # The run row says how it ended in the last events' transaction, before anyone is told.
            writer.closing, writer.ended = _closing(last), True
        return writer

    def _writer(self, first: Told) -> RunWriter:
        run_id = head_of(first)[0]
        writer = self.writer or RunWriter(self.store, run_id)
        writer.run_id = run_id
        writer.open(self._opening(first, run_id))  # the run row, in the first batch's transaction
        return writer

    def _opening(self, first: Told, run_id: str) -> Row:
        params = dict(self.params)
        if isinstance(first, RunStarted):
            params.setdefault("intent", first.intent)
            params.setdefault("model", first.model)
            params.setdefault("tools", first.tools)
        kind = self.kind
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
