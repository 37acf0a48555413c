"""The server's side of durable runs: `DurableRunner` has the in-process `Runner`'s interface
(submit, record, cancel, decide, signals, shutdown), but a submitted run is enqueued as a DBOS
workflow, executed by whichever process listens on the run queue (this one on the embedded
SQLite default; `loopwarden worker` processes on Postgres), and survives any of them dying.

SSE streams read the shared store. They are woken at once by events committed in this process,
and on Postgres by `LISTEN loopwarden_events` for events committed by workers (trace/pgstore.py);
the stream's bounded wait (sse.py) covers a missed notification."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from dbos import DBOS, SetWorkflowID

from ..events import Event
from ..policy.approval import Decision
from ..server.runner import QueueFull, Runner, RunSignals
from ..server.settings import ServerSettings
from ..trace.store import RunStore
from .database import Database
from .engine import RUN_QUEUE, Engine, launch
from .secrets import withhold
from .steps import approval_topic
from .workflow import finish, job_spec, run_workflow

log = logging.getLogger(__name__)
WAITING_STATUSES = frozenset({"queued", "running"})
LISTENING_POLL_S = 5.0
"""A stream's fallback read while the Postgres listener is connected (RunSignals.poll_s is 1 s):
every commit of events and every final status is announced (pgstore.py), so the read is only
for a notification lost in a way the listener did not see. An idle stream's reads cost the API
process about 0.8 ms of CPU a second at 1 s."""
T = TypeVar("T")


class ThreadSafeSignals(RunSignals):
    """RunSignals that may be notified from any thread (DBOS runs workflows on its own loop)."""

    def __init__(self) -> None:
        super().__init__()
        self._loop: asyncio.AbstractEventLoop | None = None

    def waiter(self, run_id: str) -> asyncio.Event:
        self._loop = asyncio.get_running_loop()
        return super().waiter(run_id)

    def wake(self, run_id: str) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            if asyncio.get_running_loop() is loop:
                self.notify(run_id)
                return
        except RuntimeError:
            pass
        loop.call_soon_threadsafe(self.notify, run_id)

    def wake_all(self) -> None:
        """Wake every waiting stream (from any thread): each reads the store once."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._notify_all)

    def _notify_all(self) -> None:
        for run_id in list(self._events):
            self.notify(run_id)


class DurableRunner(Runner):
    def __init__(self, engine: Engine, job: Any, settings: ServerSettings) -> None:
        self.engine, self.store, self.settings = engine, engine.store, settings
        self.job_spec = job_spec(job)
        self.signals: ThreadSafeSignals = ThreadSafeSignals()
        self._submitted: dict[str, Any] = {}
        self._listener: threading.Thread | None = None
        self._dbos = ThreadPoolExecutor(1, thread_name_prefix="loopwarden-dbos")

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """DBOS's synchronous calls refuse to run on an event loop's thread: run them beside it
        (each is one short database write, like the store's own)."""
        return self._dbos.submit(fn, *args, **kwargs).result()

    @property
    def active(self) -> int:
        return self.store.count_runs(statuses=WAITING_STATUSES)

    def submit(self, run_id: str, config: Any) -> None:
        """Hold the run until its `run_queued` event is committed (record), then enqueue it: a
        worker elsewhere must find the run's row and first event when it picks the run up."""
        if self.active + len(self._submitted) >= self.settings.max_concurrency + self.settings.max_queue:
            raise QueueFull(self.settings.retry_after_s)
        self._submitted[run_id] = config

    def record(self, run_id: str, event: Event) -> int:
        seq = self.store.append_event(run_id, event)
        self.signals.notify(run_id)
        config = self._submitted.pop(run_id, None)
        if config is not None:
            self._call(_enqueue, self.job_spec, config, run_id, self.engine.executes_runs)
        return seq

    def cancel(self, run_id: str) -> bool:
        run = self.store.find_run(run_id)
        if run is None or run.finished:
            return False
        self._call(DBOS.cancel_workflow, run_id)
        finish(self.store, run_id, "cancelled", "cancelled by request", ["cancelled"], self.signals.wake)
        return True

    def decide(self, run_id: str, call_id: str, *, approve: bool, by: str | None, note: str = "") -> bool:
        """Record the decision (the first one stands) and send it to the run's workflow, which
        may be waiting in another process, or not running at all until a worker recovers it."""
        if self.store.decide_approval(run_id, call_id, approve=approve, by=by, note=note) is None:
            return False
        decision = Decision(approve=approve, reason=note or None, by=by)
        self._call(DBOS.send, run_id, decision.model_dump(mode="json"), topic=approval_topic(call_id))
        return True

    async def shutdown(self) -> None:
        """Runs are not ended: they stay in the queue or pending, and resume at the next start."""
        await asyncio.to_thread(self.engine.shutdown)
        self._dbos.shutdown(wait=False)

    def listen(self) -> None:
        """On Postgres: wake SSE streams when any process commits an event."""
        if not self.engine.database.postgres or self._listener is not None:
            return
        self._listener = threading.Thread(target=self._listen, name="loopwarden-listen", daemon=True)
        self._listener.start()

    def _listen(self) -> None:
        import psycopg

        from ..trace.pgstore import EVENTS_CHANNEL

        while not self.engine._stop.is_set():
            try:
                with psycopg.connect(self.engine.database.libpq_url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    self.signals.poll_s = LISTENING_POLL_S
                    self.signals.wake_all()  # a (re)connect: what was announced before it is read now
                    for note in conn.notifies():
                        self.signals.wake(note.payload)
                        if self.engine._stop.is_set():
                            return
            except psycopg.Error as error:  # reconnect; streams meanwhile fall back to their bounded wait
                log.warning("event listener: %s", error)
                if self.engine._stop.wait(1.0):
                    return
            finally:
                self.signals.poll_s = RunSignals.poll_s


def _enqueue(job_spec: str, config: Any, run_id: str, hold: bool) -> None:
    """The workflow's input is stored: its secrets stay out (secrets.py); this process holds them
    only if it runs runs itself."""
    queue = DBOS.retrieve_queue(RUN_QUEUE)
    assert queue is not None
    config, refs = withhold(config, run_id, hold=hold)
    with SetWorkflowID(run_id):
        queue.enqueue(run_workflow, job_spec, config, run_id, [ref.model_dump(mode="json") for ref in refs])


def durable_runner(settings: ServerSettings, job: Any, database: Database) -> tuple[RunStore, DurableRunner]:
    """Start DBOS for a server: on SQLite this process runs the runs; on Postgres the workers do."""
    signals_box: list[ThreadSafeSignals] = []
    engine = launch(
        database,
        executes_runs=not database.postgres,
        global_concurrency=settings.max_concurrency,
        wake=lambda run_id: signals_box[0].wake(run_id) if signals_box else None,
    )
    runner = DurableRunner(engine, job, settings)
    signals_box.append(runner.signals)
    runner.listen()
    return engine.store, runner
