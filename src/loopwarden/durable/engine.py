"""Starting DBOS in a process: which database, which executor id, whether this process runs
runs from the queue. `launch` is called once per process (`loopwarden serve`, `loopwarden
worker`); DBOS is imported here, so nothing of it loads unless durability is asked for.

Executor ids on Postgres are claimed, not configured: worker N holds the session advisory lock
`WORKER_SLOT_LOCK + N` for its whole life and calls itself `worker-N`. Two live workers can never
share an id, and a worker that died (even by SIGKILL: Postgres drops its session and the lock)
leaves its slot free. Every worker checks, every `SWEEP_S` seconds, for runs left pending by a
slot nobody holds, and hands them back to the queue (DBOS recovery), where any worker picks them
up and replays them from their recorded steps. A worker that restarts takes the lowest free slot,
so usually it finds its own runs at launch.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..trace.store import RunStore
from .database import Database, DatabaseError

RUN_QUEUE = "loopwarden-runs"
APP_NAME = "loopwarden"
APP_VERSION = f"loopwarden-{__version__}"
QUEUE_POLL_S = 0.1
WORKER_SLOT_LOCK = 0x6C77_0000
MAX_WORKER_SLOTS = 4096
SWEEP_S = 2.0


@dataclass
class Engine:
    database: Database
    store: RunStore
    executor_id: str
    executes_runs: bool
    _slot: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def shutdown(self) -> None:
        from dbos import DBOS

        self._stop.set()
        DBOS.destroy(workflow_completion_timeout_sec=0)
        self.store.close()
        if self._slot is not None:
            self._slot.close()


def launch(
    database: Database,
    *,
    executes_runs: bool,
    global_concurrency: int | None = None,
    wake: Callable[[str], None] | None = None,
) -> Engine:
    """Check the database (DatabaseError in one line), open the run store, start DBOS. With
    `global_concurrency` this process also sets the run queue's limit across all workers."""
    database.check()
    from dbos import DBOS

    from . import workflow

    store = database.open_store()
    slot = None
    if not database.postgres:
        executor_id = "local"
    elif executes_runs:
        executor_id, slot = _claim_worker_slot(database)
    else:
        executor_id = f"api-{uuid.uuid4().hex[:12]}"
    workflow.process.store, workflow.process.wake = store, wake
    DBOS(
        config={
            "name": APP_NAME,
            "system_database_url": database.system_url,
            "executor_id": executor_id,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
        }
    )
    if not executes_runs:
        DBOS.listen_queues([])
    try:
        DBOS.launch()
    except Exception as error:  # e.g. the schema cannot be created: one line, not a traceback
        DBOS.destroy()
        raise DatabaseError(f"cannot start durable runs on {database.describe()}: {error}") from None
    DBOS.register_queue(
        RUN_QUEUE,
        global_concurrency=global_concurrency,
        polling_interval_sec=QUEUE_POLL_S,
        on_conflict="always_update" if global_concurrency is not None else "never_update",
    )
    engine = Engine(database, store, executor_id, executes_runs, slot)
    if slot is not None:
        threading.Thread(target=_sweep, args=(engine,), name="loopwarden-sweep", daemon=True).start()
    return engine


def _claim_worker_slot(database: Database) -> tuple[str, Any]:
    import psycopg

    conn = psycopg.connect(database.libpq_url, autocommit=True)
    for n in range(1, MAX_WORKER_SLOTS + 1):
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (WORKER_SLOT_LOCK + n,)).fetchone()
        if row is not None and row[0]:
            return f"worker-{n}", conn
    conn.close()
    raise DatabaseError(f"all {MAX_WORKER_SLOTS} worker slots are taken")


def _sweep(engine: Engine) -> None:
    """Recover runs whose worker is gone (its slot lock is free), until shut down."""
    from dbos import DBOS

    conn = engine._slot
    while not engine._stop.wait(SWEEP_S):
        try:
            rows = conn.execute(
                "SELECT DISTINCT executor_id FROM dbos.workflow_status"
                " WHERE status = 'PENDING' AND executor_id LIKE 'worker-%%' AND executor_id <> %s",
                (engine.executor_id,),
            ).fetchall()
            for (executor_id,) in rows:
                lock = WORKER_SLOT_LOCK + int(executor_id.removeprefix("worker-"))
                taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
                if not (taken and taken[0]):
                    continue  # its worker is alive
                try:
                    DBOS._recover_pending_workflows([executor_id])
                finally:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
        except Exception:  # a lost connection ends sweeping, not the worker
            if engine._stop.is_set():
                return
            continue
