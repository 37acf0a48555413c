"""The run store on Postgres: the same tables, queries and migrations as the SQLite store
(store.py), for runs shared by several processes or machines (`LOOPWARDEN_DATABASE_URL`).

How the SQLite semantics carry over: writers serialise on one transaction-scoped advisory lock,
as SQLite writers do under `BEGIN IMMEDIATE`, except event appends, which lock only their run's
row, so "read last_seq, insert last_seq + 1" stays gap- and duplicate-free across processes
while runs proceed in parallel; `REAL` columns become `DOUBLE PRECISION` (Postgres's
`REAL` is four bytes, too coarse for timestamps); each committed event is announced with
`NOTIFY loopwarden_events, '<run id>'`, as is a run's final status, so API processes wake their
SSE streams without polling.
Needs `psycopg` (the `durable` extra), imported when a store is opened.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

from ..events import Event
from ..hotpath.kept import Told
from .migrations import MIGRATIONS, Migration
from .records import StoredEvent
from .rows import read_events, write_batch
from .store import Exchanges, RunStore

EVENTS_CHANNEL = "loopwarden_events"
WRITE_LOCK = 0x6C77_7374  # one advisory lock for all writers of the store ("lwst")
_PLACEHOLDER = re.compile(r"\?")


class _Row(dict[str, Any]):
    """A row readable by name (`row["seq"]`, `dict(row)`) and by position (`row[0]`), like sqlite3.Row."""

    def __init__(self, names: Sequence[str], values: Sequence[Any]) -> None:
        super().__init__(zip(names, values, strict=True))
        self._values = tuple(values)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            return self._values[key]
        return super().__getitem__(key)


class _Cursor:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor
        self.rowcount: int = cursor.rowcount

    def _row(self, values: Sequence[Any] | None) -> _Row | None:
        if values is None:
            return None
        return _Row([c.name for c in self._cursor.description], values)

    def fetchone(self) -> _Row | None:
        return self._row(self._cursor.fetchone()) if self._cursor.description else None

    def fetchall(self) -> list[_Row]:
        if not self._cursor.description:
            return []
        names = [c.name for c in self._cursor.description]
        return [_Row(names, values) for values in self._cursor.fetchall()]


class _Connection:
    """The slice of the sqlite3 connection API the store uses, over one psycopg connection."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(_PLACEHOLDER.sub("%s", sql), rows)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        if sql == "BEGIN IMMEDIATE":
            self.conn.execute("BEGIN")
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            return _Cursor(self.conn.execute("SELECT 1 WHERE false"))
        return _Cursor(self.conn.execute(_PLACEHOLDER.sub("%s", sql), tuple(params)))

    def close(self) -> None:
        self.conn.close()


def postgres_migrations(migrations: Sequence[Migration]) -> list[Migration]:
    """The SQLite migrations in Postgres's dialect (the statements are otherwise portable)."""
    out = []
    for m in migrations:
        sql = re.sub(r"\bREAL\b", "DOUBLE PRECISION", m.sql if m.postgres is None else m.postgres)
        sql = re.sub(r"\)\s*WITHOUT ROWID", ")", sql)
        out.append(m._replace(sql=sql))
    return out


def _keep_nul_free(conn: Any) -> None:
    """Postgres text cannot hold U+0000, which SQLite's can and a model's text may: psycopg
    refuses such a string, and the write that closes a run would fail and leave it `running`.
    On the store's connections a NUL is sent as U+FFFD. Events, params and exchanges are JSON,
    which writes it escaped, so only the plain text columns (a run's message, an approval's
    tool, reason and note) see the change."""
    for dumper in _nul_free_dumpers():
        conn.adapters.register_dumper(str, dumper)


@cache
def _nul_free_dumpers() -> tuple[type, ...]:
    from psycopg.types.string import StrBinaryDumper, StrDumperUnknown

    class NulFreeText(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)

    class NulFreeBinary(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)

    return NulFreeText, NulFreeBinary


class PostgresRunStore(RunStore):
    """`RunStore` on a Postgres database given by URL (postgresql://user@host:port/db)."""

    def __init__(self, url: str, *, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        import psycopg

        self.url = url
        self._psycopg = psycopg
        self._local = threading.local()
        self._connections: list[Any] = []
        self._lock = threading.Lock()
        self.migrate(postgres_migrations(migrations))

    def _connection(self) -> Any:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.conn.closed:
            raw = self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            _keep_nul_free(raw)
            conn = _Connection(raw)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[Any]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.conn.execute("ROLLBACK")
            raise
        conn.conn.execute("COMMIT")

    @property
    def where(self) -> str:
        return "on Postgres"  # not the URL: it may hold a password

    def migrate(self, migrations: Sequence[Migration] = MIGRATIONS) -> int:
        with self._write() as tx:  # the first start of several processes at once: one creates the table
            tx.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (version INTEGER PRIMARY KEY, name TEXT, applied_at DOUBLE PRECISION)"
            )
        return super().migrate(migrations)

    def append_events(
        self,
        run_id: str,
        events: Sequence[Told],
        *,
        with_rows: Callable[[Any], None] | None = None,
        exchanges: Exchanges = (),
        wait: bool = True,
    ) -> list[int] | None:
        """In one transaction, as the SQLite store's: the rows that go with them (under the
        store's write lock), then the events, numbered with the run's row locked (by the update
        that numbers them, so writers of other runs do not wait), announced once with the
        commit. Never without waiting (wait=False: None): every write may wait on the network, so
        none is made on the event loop's thread."""
        if not wait:
            return None
        with self._write() if with_rows is not None or exchanges else self._transaction() as tx:
            if with_rows is not None:
                with_rows(tx)
            seqs = write_batch(tx, run_id, events, [row(tx) for row in exchanges], returning=True)
            if not events:
                return []
            self._announce(tx, run_id)
        return seqs

    def _announce(self, tx: Any, run_id: str) -> None:
        """NOTIFY with the commit, for each committed batch of events and each final status: a
        run's final status is set after its terminal event, whose own notification may wake a
        stream before it, and a stream ends only once the row is final (sse.py)."""
        tx.execute("SELECT pg_notify(?, ?)", (EVENTS_CHANNEL, run_id))

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A transaction without the store's write lock (rows it writes lock themselves)."""
        conn = self._connection()
        with conn.conn.transaction():
            yield conn

    def append_event(self, run_id: str, event: Event) -> int:
        """As the SQLite store's, but runs do not wait for each other: the run's row is locked
        (by the update that numbers the event), not the whole store, and the notification goes
        out with the commit."""
        seqs = self.append_events(run_id, [event])
        assert seqs is not None
        return seqs[0]

    def event_rows(self, run_id: str, after_seq: int = 0, *, limit: int | None = None) -> list[StoredEvent]:
        # LIMIT NULL: no limit (SQLite spells it -1)
        return read_events(self._connection(), run_id, after_seq, limit, no_limit=None)
