"""Starting DBOS in a process: which database, which executor id, whether this process runs
runs from the queue. `launch` is called once per process (`loopwarden serve`, `loopwarden
worker`); DBOS is imported here, so nothing of it loads unless durability is asked for.

Executor ids on Postgres are claimed, not configured: worker N holds the session advisory lock
`WORKER_SLOT_LOCK + N` for its whole life and calls itself `worker-N`. Two live workers can never
share an id, and a worker that died (even by SIGKILL: Postgres drops its session and the lock)
leaves its slot free. Every worker checks, every `SWEEP_S` seconds, for runs left pending by a
slot nobody holds (in two checks in a row), and hands them back to the queue (DBOS recovery),
where any worker picks them up and replays them from their recorded steps. A worker that
restarts takes the lowest free slot, so usually it finds its own runs at launch.

The slot's session is the worker's heartbeat: Postgres ends it when the process dies, and, with
the TCP keepalives set on it (`KEEPALIVE`), within about half a minute when the machine or the
network goes. The other side of the lease: a worker whose own session is gone (a network cut,
`pg_terminate_backend`) may already have had its runs handed to others, so it must not write
another step: it stops within SWEEP_S / 2 (`on_lost`; `loopwarden worker` exits with one line),
before the others, who wait for two free sightings SWEEP_S apart, hand its runs on; the step it
was running is re-run there like any crashed step.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..trace.store import RunStore
from .database import Database, DatabaseError

log = logging.getLogger(__name__)
RUN_QUEUE = "loopwarden-runs"
APP_NAME = "loopwarden"
APP_VERSION = f"loopwarden-{__version__}"
QUEUE_POLL_S = 0.5
"""How often a worker asks the database for queued runs (DBOS's default is 1 s): a run waits up to
this long to start. Each poll is a few queries: at 0.1 s an idle worker used twice the CPU (0.055
against 0.027 s a second), asking the shared database five times as often."""
NOTIFY_COALESCE_S = 0.2
"""How often DBOS's notifier thread wakes to push coalesced NOTIFYs for workflow events and
streams (DBOS's default is 0.01 s). loopwarden uses neither (approvals are send/recv, which
notify on their own), and at 100 wake-ups a second the thread alone cost an idle process 5-7 ms
of CPU a second; a job that does use DBOS events sees them up to this much later."""
WORKER_SLOT_LOCK = 0x6C77_0000
MAX_WORKER_SLOTS = 4096
SWEEP_S = 2.0
KEEPALIVE = {"keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
"""TCP keepalives on the slot session, set on both ends (libpq's and the server's settings)."""


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
    on_lost: Callable[[str], None] | None = None,
) -> Engine:
    """Check the database (DatabaseError in one line), open the run store, start DBOS. With
    `global_concurrency` this process also sets the run queue's limit across all workers.
    `on_lost(message)` is called (from the sweep thread) if a worker loses its slot session."""
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
            "notification_coalesce_sec": NOTIFY_COALESCE_S,
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
        lost = on_lost or (lambda message: log.error("%s", message))
        threading.Thread(target=_sweep, args=(engine, lost), name="loopwarden-sweep", daemon=True).start()
    return engine


def _claim_worker_slot(database: Database) -> tuple[str, Any]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    server_side = " ".join(f"-c tcp_{name}={value}" for name, value in KEEPALIVE.items())
    conninfo = make_conninfo(database.libpq_url, keepalives=1, options=server_side, **KEEPALIVE)
    conn = psycopg.connect(conninfo, autocommit=True)
    for n in range(1, MAX_WORKER_SLOTS + 1):
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (WORKER_SLOT_LOCK + n,)).fetchone()
        if row is not None and row[0]:
            return f"worker-{n}", conn
    conn.close()
    raise DatabaseError(f"all {MAX_WORKER_SLOTS} worker slots are taken")


def _sweep(engine: Engine, on_lost: Callable[[str], None]) -> None:
    """Until shut down: every SWEEP_S / 2 check this worker's own slot session (gone: stop), and
    every SWEEP_S recover the runs of slots found free twice in a row, so a worker that lost its
    session has stopped (it checks twice as often) before its runs are handed on."""
    import psycopg
    from dbos import DBOS

    conn = engine._slot
    free_before: set[str] = set()
    tick = 0
    while not engine._stop.wait(SWEEP_S / 2):
        try:
            conn.execute("SELECT 1")
        except psycopg.Error as error:
            if not engine._stop.is_set():
                reason = " ".join(str(error).split()) or type(error).__name__
                on_lost(f"{engine.executor_id} lost its database session ({reason}): its runs go to other workers")
            return
        tick += 1
        if tick % 2:
            continue
        try:
            free_before = _recover_dead_workers(engine, conn, DBOS, free_before)
        except Exception as error:  # the next round tries again; a lost session is caught above
            log.warning("recovering dead workers' runs: %s", error)


def _recover_dead_workers(engine: Engine, conn: Any, dbos: Any, free_before: set[str]) -> set[str]:
    """Hand back to the queue the pending runs of slots that were free last time and still are;
    returns the slots free now."""
    rows = conn.execute(
        "SELECT DISTINCT executor_id FROM dbos.workflow_status"
        " WHERE status = 'PENDING' AND executor_id LIKE 'worker-%%' AND executor_id <> %s",
        (engine.executor_id,),
    ).fetchall()
    free = set()
    for (executor_id,) in rows:
        lock = WORKER_SLOT_LOCK + int(executor_id.removeprefix("worker-"))
        taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
        if not (taken and taken[0]):
            continue  # its worker is alive
        free.add(executor_id)
        try:
            if executor_id in free_before:
                dbos._recover_pending_workflows([executor_id])
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
    return free
