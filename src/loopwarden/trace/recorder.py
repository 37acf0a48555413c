"""Keep every event of a run in the run store as it happens.

    recorder = TraceRecorder(RunStore("runs.db"))
    async for event in recorder.record(agent.stream("question")):
        ...                                    # events pass through unchanged

The run row is created at the first event and closed with the final status, stop reason and
totals at `run_finished`; a stream that raises, is cancelled or is left unread leaves the run `failed` or
`cancelled` with every event up to that point kept. Store writes run in a worker thread so
the event loop never waits on SQLite.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ..events import Event, RunFinished, RunStarted
from .store import RunStore


class TraceRecorder:
    def __init__(self, store: RunStore, *, kind: str = "agent", params: dict[str, Any] | None = None) -> None:
        self.store = store
        self.kind = kind
        self.params = dict(params or {})

    async def record(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        run_id: str | None = None
        finished = False
        try:
            async for event in events:
                if run_id is None:
                    run_id = event.run_id
                    await asyncio.to_thread(self._open, event)
                await asyncio.to_thread(self.store.append_event, run_id, event)
                if isinstance(event, RunFinished):
                    finished = True
                    await asyncio.to_thread(self._close, event)
                yield event
        except (asyncio.CancelledError, GeneratorExit):
            # GeneratorExit: the consumer stopped reading mid-run (break, aclose): the run ends there.
            if run_id is not None and not finished:
                self.store.set_status(run_id, "cancelled", message="the run was cancelled")
            raise
        except Exception as error:
            if run_id is not None and not finished:
                self.store.set_status(run_id, "failed", message=f"{type(error).__name__}: {error}")
            raise

    def _open(self, first: Event) -> None:
        params = dict(self.params)
        if isinstance(first, RunStarted):
            params.setdefault("intent", first.intent)
            params.setdefault("model", first.model)
            params.setdefault("tools", first.tools)
        if self.store.find_run(first.run_id) is None:
            self.store.create_run(kind=self.kind, params=params, status="running", run_id=first.run_id)
        else:
            self.store.set_status(first.run_id, "running")

    def _close(self, last: RunFinished) -> None:
        self.store.set_status(
            last.run_id,
            last.status,
            stop_reasons=[last.stop_reason],
            totals=last.totals.model_dump(),
            message=str(last.output)[:500] if last.output is not None else "",
        )
