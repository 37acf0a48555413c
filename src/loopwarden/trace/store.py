"""The run store on SQLite: runs, their events (numbered per run, committed before anyone
streams them), artifacts and pending approvals.

Why these settings: WAL lets readers (SSE streams, the runs list) proceed while one writer
commits; `busy_timeout` makes a second writer wait instead of failing with "database is
locked"; writers take `BEGIN IMMEDIATE` so two writers never both read-then-upgrade and
deadlock. Each thread gets its own connection (sqlite3 connections are not shared across
threads); every query is parameterised.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..errors import RunNotFound as RunNotFound  # its home is loopwarden.errors
from ..events import Event
from ..hotpath.kept import Told
from . import checkpoint
from .migrations import MIGRATIONS, Migration, split_statements
from .records import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    ApprovalRecord,
    ApprovalStatus,
    ArtifactRecord,
    RunRecord,
    RunStatus,
    StoredEvent,
)
from .rows import read_events, update_status, write_batch

BUSY_TIMEOUT_MS = 30_000
Exchanges = Sequence[Callable[[Any], tuple[int, str]]]
"""Model exchanges to commit with events: each gives its number and line, given the transaction."""

__all__ = [
    "ACTIVE_STATUSES",
    "FINAL_STATUSES",
    "ApprovalRecord",
    "ApprovalStatus",
    "ArtifactRecord",
    "RunNotFound",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "StoredEvent",
    "new_run_id",
]


def new_run_id() -> str:
    """128 random bits: run ids are capabilities in URLs, so they must not be guessable."""
    return secrets.token_hex(16)


class RunStore:
    """Thread-safe handle on one SQLite run store file (or ":memory:"-like temporary paths are not
    supported: every thread must see the same database, so give it a file)."""

    def __init__(self, path: str | Path, *, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._pages = checkpoint.pages(self.path)  # what this file's commits wrote since a checkpoint
        self.migrate(migrations)

    # -- connections and transactions -------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL in WAL mode: a killed process loses nothing committed; only an OS crash could.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _append_now(
        self, run_id: str, events: Sequence[Told], with_rows: Callable[[Any], None] | None, exchanges: Exchanges
    ) -> list[int] | None:
        """`append_events` in a write transaction if no other writer holds the store this
        instant, else None (and nothing waits): for the event loop's own thread, which must never
        wait on a lock. Its connection leaves WAL checkpoints to a background thread
        (trace/checkpoint.py). Written out, not a context manager: it runs once per model call
        of a run whose model makes it wait (a generator context manager was ~3,000
        instructions of each)."""
        conn: sqlite3.Connection | None = getattr(self._local, "now", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
            conn.row_factory = sqlite3.Row
            pragmas = ("busy_timeout = 0", "synchronous = NORMAL", "foreign_keys = ON", "wal_autocheckpoint = 0")
            try:
                for pragma in pragmas:
                    conn.execute(f"PRAGMA {pragma}")
            except sqlite3.OperationalError:
                # Locked this instant, even for reading: the last connection to the store is
                # closing (it checkpoints and deletes the log under an exclusive lock). Opened
                # again at the next commit; this one waits in the caller's worker thread.
                conn.close()
                return None
            self._local.now = conn
            with self._lock:
                self._connections.append(conn)
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # database is locked: another writer has it
            return None
        changes = conn.total_changes
        try:
            if with_rows is not None:
                with_rows(conn)
            seqs = write_batch(conn, run_id, events, [row(conn) for row in exchanges], returning=False)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        # Checkpointed in the background, never on this thread, by how much was written.
        # The events counted as rows: a batch of them is one row of as many bytes.
        self._pages.committed(conn.total_changes - changes + len(seqs))
        return seqs

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def migrate(self, migrations: Sequence[Migration] = MIGRATIONS) -> int:
        """Apply the migrations not applied yet, in version order, each in its own transaction.
        Returns the schema version."""
        conn = self._connection()
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
        )
        # Read without the write lock first: a version once applied stays applied, so a store
        # opened again (a traced run opens one each) takes no write transaction at all.
        applied = {int(row[0]) for row in conn.execute("SELECT version FROM schema_migrations").fetchall()}
        known = max((m.version for m in migrations), default=0)
        if applied and max(applied) > known:
            # A newer loopwarden changed where things are kept (migration 4 moved events into
            # batch rows): read with this one, its runs would look empty, and writes would mix.
            raise ConfigError(
                f"the run store {self.where} has schema version {max(applied)}, newer than this"
                f" loopwarden's {known}: it was written by a newer loopwarden; upgrade this one to use it"
            )
        for migration in sorted(migrations, key=lambda m: m.version):
            if migration.version in applied:
                continue
            with self._write() as tx:
                # Re-checked inside the write lock: another process may have just applied it.
                if tx.execute("SELECT 1 FROM schema_migrations WHERE version = ?", (migration.version,)).fetchone():
                    continue
                for statement in split_statements(migration.sql):
                    tx.execute(statement)
                tx.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, time.time()),
                )
        return self.schema_version()

    @property
    def where(self) -> str:
        """The store as an error message names it."""
        return f"at {self.path}"

    def schema_version(self) -> int:
        row = self._connection().execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    # -- runs -------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        kind: str = "report",
        params: dict[str, Any] | None = None,
        data_dir: str | Path | None = None,
        out_dir: str | Path | None = None,
        status: RunStatus = "queued",
        run_id: str | None = None,
    ) -> RunRecord:
        run_id = run_id or new_run_id()
        now = time.time()
        with self._write() as tx:
            tx.execute(
                "INSERT INTO runs (id, kind, status, created_at, updated_at, params, data_dir, out_dir)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    kind,
                    status,
                    now,
                    now,
                    json.dumps(params or {}),
                    None if data_dir is None else str(data_dir),
                    None if out_dir is None else str(out_dir),
                ),
            )
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RunRecord:
        row = self._connection().execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        return _run_record(row)

    def find_run(self, run_id: str) -> RunRecord | None:
        try:
            return self.get_run(run_id)
        except RunNotFound:
            return None

    def list_runs(self, *, limit: int = 100, offset: int = 0, status: str | None = None) -> list[RunRecord]:
        if status is None:
            rows = self._connection().execute(
                "SELECT * FROM runs ORDER BY created_at DESC, id LIMIT ? OFFSET ?", (limit, offset)
            )
        else:
            rows = self._connection().execute(
                "SELECT * FROM runs WHERE status = ? ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
                (status, limit, offset),
            )
        return [_run_record(row) for row in rows.fetchall()]

    def count_runs(self, *, statuses: frozenset[str] | None = None) -> int:
        conn = self._connection()
        if statuses is None:
            return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        marks = ",".join("?" * len(statuses))
        return int(conn.execute(f"SELECT COUNT(*) FROM runs WHERE status IN ({marks})", tuple(statuses)).fetchone()[0])

    def set_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        message: str | None = None,
        stop_reasons: list[str] | None = None,
        totals: dict[str, Any] | None = None,
    ) -> RunRecord:
        with self._write() as tx:
            if update_status(tx, run_id, status, message=message, stop_reasons=stop_reasons, totals=totals) == 0:
                raise RunNotFound(run_id)
            if status in FINAL_STATUSES:
                self._announce(tx, run_id)
        return self.get_run(run_id)

    def _announce(self, tx: Any, run_id: str) -> None:
        """Tell other processes, with the commit, that the run changed (a final status): nothing
        to do here, where one process owns the file and wakes its own streams."""

    def set_progress(self, run_id: str, progress: dict[str, Any]) -> None:
        with self._write() as tx:
            tx.execute(
                "UPDATE runs SET progress = ?, updated_at = ? WHERE id = ?", (json.dumps(progress), time.time(), run_id)
            )

    def mark_interrupted_on_start(
        self, *, reason: str = "the server stopped while this run was in progress"
    ) -> list[str]:
        """Called once when a server starts: runs left queued/running/paused by a process that died
        are marked `interrupted`; their events stay, and a `run_interrupted` event is appended so
        streams of them end. Returns the ids marked."""
        marks = ",".join("?" * len(ACTIVE_STATUSES))
        now = time.time()
        with self._write() as tx:
            rows = tx.execute(
                f"SELECT id, last_seq FROM runs WHERE status IN ({marks})", tuple(sorted(ACTIVE_STATUSES))
            ).fetchall()
            for row in rows:
                seq = int(row["last_seq"]) + 1
                data = {"type": "run_interrupted", "run_id": row["id"], "seq": seq, "ts": now, "message": reason}
                tx.execute(
                    "INSERT INTO events (run_id, seq, type, ts, data) VALUES (?, ?, ?, ?, ?)",
                    (row["id"], seq, "run_interrupted", now, json.dumps(data)),
                )
                tx.execute(
                    "UPDATE runs SET status = 'interrupted', last_seq = ?, updated_at = ?, finished_at = ?,"
                    " message = ? WHERE id = ?",
                    (seq, now, now, reason, row["id"]),
                )
                tx.execute(
                    "UPDATE approvals SET status = 'expired', decided_at = ? WHERE run_id = ? AND status = 'pending'",
                    (now, row["id"]),
                )
        return [str(row["id"]) for row in rows]

    # -- events -----------------------------------------------------------------------------

    def append_event(self, run_id: str, event: Event) -> int:
        """Commit one event and return its sequence number. The store numbers events (last + 1)
        so a run's sequence has no gaps or duplicates whoever stamped the event; the stored JSON
        carries that number."""
        seqs = self.append_events(run_id, [event])
        assert seqs is not None
        return seqs[0]

    def append_events(
        self,
        run_id: str,
        events: Sequence[Told],
        *,
        with_rows: Callable[[Any], None] | None = None,
        exchanges: Exchanges = (),
        wait: bool = True,
    ) -> list[int] | None:
        """Commit events in one transaction, numbered as `append_event` does, after `with_rows(tx)`
        (rows that go with them, such as the run's) in the same transaction, with the model
        `exchanges` (each gives its number and line, given the transaction) in their row. An
        event may be one a run kept as its dict (hotpath/kept.py: written from it). With
        `wait=False` it writes only if no other writer holds the store this instant, and returns
        None having written nothing otherwise."""
        if not wait:
            return self._append_now(run_id, events, with_rows, exchanges)
        with self._write() as tx:
            if with_rows is not None:
                with_rows(tx)
            return write_batch(tx, run_id, events, [row(tx) for row in exchanges], returning=False)

    def event_rows(self, run_id: str, after_seq: int = 0, *, limit: int | None = None) -> list[StoredEvent]:
        return read_events(self._connection(), run_id, after_seq, limit, no_limit=-1)

    def events(self, run_id: str, after_seq: int = 0, *, limit: int | None = None) -> list[Event]:
        return [row.event() for row in self.event_rows(run_id, after_seq, limit=limit)]

    def last_seq(self, run_id: str) -> int:
        return self.get_run(run_id).last_seq

    # -- artifacts --------------------------------------------------------------------------

    def add_artifact(self, run_id: str, name: str, path: str | Path, *, media_type: str, size: int) -> None:
        with self._write() as tx:
            tx.execute(
                "INSERT INTO artifacts (run_id, name, path, size, media_type, created_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, name) DO UPDATE SET path = excluded.path, size = excluded.size,"
                " media_type = excluded.media_type, created_at = excluded.created_at",
                (run_id, name, str(path), size, media_type, time.time()),
            )

    def artifacts(self, run_id: str) -> list[ArtifactRecord]:
        rows = self._connection().execute("SELECT * FROM artifacts WHERE run_id = ? ORDER BY name", (run_id,))
        return [ArtifactRecord(**dict(row)) for row in rows.fetchall()]

    def artifact(self, run_id: str, name: str) -> ArtifactRecord | None:
        row = (
            self._connection()
            .execute("SELECT * FROM artifacts WHERE run_id = ? AND name = ?", (run_id, name))
            .fetchone()
        )
        return None if row is None else ArtifactRecord(**dict(row))

    # -- approvals --------------------------------------------------------------------------

    def add_approval(self, run_id: str, call_id: str, tool: str, arguments: Any = None, reason: str = "") -> None:
        with self._write() as tx:
            tx.execute(
                "INSERT INTO approvals (run_id, call_id, tool, arguments, reason, created_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, call_id) DO NOTHING",
                (run_id, call_id, tool, json.dumps(arguments, default=str), reason, time.time()),
            )

    def approvals(self, run_id: str, *, status: ApprovalStatus | None = None) -> list[ApprovalRecord]:
        if status is None:
            rows = self._connection().execute(
                "SELECT * FROM approvals WHERE run_id = ? ORDER BY created_at, call_id", (run_id,)
            )
        else:
            rows = self._connection().execute(
                "SELECT * FROM approvals WHERE run_id = ? AND status = ? ORDER BY created_at, call_id", (run_id, status)
            )
        return [_approval_record(row) for row in rows.fetchall()]

    def approval(self, run_id: str, call_id: str) -> ApprovalRecord | None:
        row = (
            self._connection()
            .execute("SELECT * FROM approvals WHERE run_id = ? AND call_id = ?", (run_id, call_id))
            .fetchone()
        )
        return None if row is None else _approval_record(row)

    def decide_approval(
        self, run_id: str, call_id: str, *, approve: bool, by: str | None = None, note: str = ""
    ) -> ApprovalRecord | None:
        """Decide a pending approval once. Returns the decided record, or None when there is no
        pending approval with that id (unknown, or already decided: the first decision stands)."""
        with self._write() as tx:
            cursor = tx.execute(
                "UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, note = ?"
                " WHERE run_id = ? AND call_id = ? AND status = 'pending'",
                ("approved" if approve else "denied", time.time(), by, note, run_id, call_id),
            )
            decided = cursor.rowcount == 1
        return self.approval(run_id, call_id) if decided else None


def _run_record(row: sqlite3.Row) -> RunRecord:
    data = dict(row)
    data["params"] = json.loads(data["params"] or "{}")
    data["stop_reasons"] = json.loads(data["stop_reasons"] or "[]")
    data["progress"] = None if data["progress"] is None else json.loads(data["progress"])
    data["totals"] = None if data["totals"] is None else json.loads(data["totals"])
    return RunRecord(**data)


def _approval_record(row: sqlite3.Row) -> ApprovalRecord:
    data = dict(row)
    data["arguments"] = json.loads(data["arguments"])
    return ApprovalRecord(**data)
