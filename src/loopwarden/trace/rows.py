"""The rows a run's writes are made of, written inside a transaction the caller holds (a
`RunStore._write()` connection, or a Postgres one): shared by the SQLite and Postgres stores and
by the trace writer, which puts a run's opening, its events and its closing in the transactions
it already makes."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

from ..errors import RunNotFound
from ..hotpath.kept import Told, count_of
from .lines import event_lines as event_lines  # its home is trace/lines.py
from .lines import event_parts, event_row, flat, head_of, numbered
from .records import FINAL_STATUSES, RunStatus, StoredEvent


def update_status(
    tx: Any,
    run_id: str,
    status: RunStatus,
    *,
    message: str | None = None,
    stop_reasons: list[str] | None = None,
    totals: dict[str, Any] | None = None,
) -> int:
    """Set a run's status (and what comes with it) in the open transaction `tx`; returns the
    number of rows updated (0: no such run)."""
    now = time.time()
    sets = ["status = ?", "updated_at = ?"]
    values: list[Any] = [status, now]
    if status == "running":
        sets.append("started_at = COALESCE(started_at, ?)")
        values.append(now)
    if status in FINAL_STATUSES:
        sets.append("finished_at = ?")
        values.append(now)
    for column, value in (("message", message), ("stop_reasons", stop_reasons), ("totals", totals)):
        if value is not None:
            sets.append(f"{column} = ?")
            values.append(value if isinstance(value, str) else json.dumps(value))
    return int(tx.execute(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", (*values, run_id)).rowcount)


def open_run(tx: Any, run_id: str, *, kind: str, params: dict[str, Any]) -> None:
    """In the open transaction `tx`: the run's row, new and running, or an existing run's set
    running again (a resumed run keeps its params and its first start)."""
    now = time.time()
    tx.execute(
        "INSERT INTO runs (id, kind, status, created_at, updated_at, started_at, params)"
        " VALUES (?, ?, 'running', ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET status = 'running',"
        " updated_at = excluded.updated_at, started_at = COALESCE(runs.started_at, excluded.started_at)",
        (run_id, kind, now, now, now, json.dumps(params)),
    )


INSERT_BATCH = (
    "INSERT INTO event_batches (run_id, last_seq, first_seq, data, exchanges, last_n) VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_NUMBERED_BATCH = (
    "INSERT INTO event_batches (batch, first_seq, data, exchanges, last_n)"
    " SELECT (number << 32) | ?, ?, ?, ?, ? FROM run_numbers WHERE run_id = ?"
)
"""SQLite (migration 7): a batch keyed by its run's number and its last event number, in one
statement; it inserts nothing if the run has no number yet."""
SEQ_BITS = 32
"""On SQLite a batch's key holds its last event number in these bits (its run's number above)."""
INSERT_EVENT = "INSERT INTO events (run_id, seq, type, ts, data) VALUES (?, ?, ?, ?, ?)"
INSERT_EXCHANGE = (
    "INSERT INTO model_exchanges (run_id, n, base, prefix, model, request, reply, error, ts, tools_from)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _batches(columns: str, where: str = "", order: str = "") -> tuple[str, str]:
    """SELECT `columns` of a run's batches after an event number, in order, at most LIMIT
    (parameters: run id, event number, limit): on Postgres, then on SQLite, where they are a
    range of the table's rowid (migration 7: run number << 32 | last event number)."""
    return (
        f"SELECT {columns} FROM event_batches WHERE run_id = ? AND last_seq > ?{where}"
        f" ORDER BY last_seq{order} LIMIT ?",
        f"SELECT {columns} FROM run_numbers, event_batches WHERE run_numbers.run_id = ?"
        f" AND batch > (number << 32) + ? AND batch < (number + 1) << 32{where} ORDER BY batch{order} LIMIT ?",
    )


READ_BATCHES = _batches("first_seq, data")
EXCHANGE_BATCHES = _batches("exchanges", " AND exchanges IS NOT NULL")
LAST_EXCHANGE_BATCH = _batches("last_n", " AND last_n IS NOT NULL", " DESC")


def on_sqlite(conn: Any) -> bool:
    """Whether `conn` is SQLite's (else the Postgres store's): which layout `event_batches` has."""
    return isinstance(conn, sqlite3.Connection)


def last_exchange(tx: Any, run_id: str) -> int:
    """The number of a run's last model exchange, a row of `model_exchanges` or a line of a
    batch's (0: none). Batches are numbered in commit order, exchanges too: the latest batch that
    has any holds the last, and only it is read (`last_n` is stored after the batch's JSON: MAX
    over every batch would read each of them whole)."""
    alone = tx.execute("SELECT COALESCE(MAX(n), 0) FROM model_exchanges WHERE run_id = ?", (run_id,)).fetchone()
    batch = tx.execute(LAST_EXCHANGE_BATCH[on_sqlite(tx)], (run_id, 0, 1)).fetchone()
    return max(int(alone[0]), 0 if batch is None else int(batch[0]))


def exchange_line(
    n: int, base: int, prefix: int, model_json: str, ts: float, tools_from: int | None, request: str,
    reply: str | None, error: str | None,
) -> str:  # fmt: skip
    """A model exchange as a line of `event_batches.exchanges` (migration 6): `model_exchanges`'s
    columns joined by U+001F, which no JSON text holds unescaped (nor a line break), so the
    request, reply and error are kept byte for byte and read back without parsing them. The
    model's name is given as JSON (it may hold anything); an empty field is None. The time is
    written by pydantic's float writer (the shortest digits, as repr; `float()` reads both of
    its forms, 0.00001 and 1e+16): repr of a 17-digit time was ~8,400 instructions, more than
    half of making the line (callgrind), against ~1,900."""
    tools, answer, when = "" if tools_from is None else tools_from, reply or "", to_json(ts).decode()
    return f"{n}\x1f{base}\x1f{prefix}\x1f{model_json}\x1f{when}\x1f{tools}\x1f{request}\x1f{answer}\x1f{error or ''}"


def read_exchange_line(line: str) -> dict[str, Any]:
    """An `exchange_line` as the `model_exchanges` row it stands for (its columns by name)."""
    n, base, prefix, model, ts, tools_from, request, reply, error = line.split("\x1f")
    return {
        "n": int(n),
        "base": int(base),
        "prefix": int(prefix),
        "model": json.loads(model),
        "ts": float(ts),
        "tools_from": int(tools_from) if tools_from else None,
        "request": request,
        "reply": reply or None,
        "error": error or None,
    }


def insert_exchange_lines(tx: Any, run_id: str, exchanges: Sequence[tuple[int, str]]) -> None:
    """Exchanges committed without a batch row to ride in: a `model_exchanges` row each."""
    rows = []
    for _, line in exchanges:
        row = read_exchange_line(line)
        values = (row["n"], row["base"], row["prefix"], row["model"], row["request"], row["reply"], row["error"])
        rows.append((run_id, *values, row["ts"], row["tools_from"]))
    tx.executemany(INSERT_EXCHANGE, rows)


def write_batch(
    tx: Any, run_id: str, events: Sequence[Told], exchanges: Sequence[tuple[int, str]], *, returning: bool
) -> list[int]:
    """A commit's events (`insert_events`) with its model exchanges (number, `exchange_line`)."""
    if events:
        return insert_events(tx, run_id, events, returning=returning, exchanges=exchanges)
    if exchanges:
        insert_exchange_lines(tx, run_id, exchanges)
    return []


def insert_events(
    tx: Any, run_id: str, events: Sequence[Told], *, returning: bool, exchanges: Sequence[tuple[int, str]] = ()
) -> list[int]:
    """Number `events` after the run's last and insert them, the run's row moved on first.
    `returning`: in one statement that returns the new last number (UPDATE ... RETURNING: on
    Postgres one round trip fewer than reading it first, and the update locks the run's row as
    SELECT ... FOR UPDATE would). SQLite updates only where the row is at the number the events
    follow (one statement a commit), else reads then updates: there RETURNING builds an
    ephemeral table per statement, about 12,000 instructions a commit more than the two
    statements (callgrind, 1,000 commits).

    The events go in as one `event_batches` row, their JSON one a line (migration 4): one
    insert a commit instead of one per event, which was most of what SQLite did for a traced
    run. An event whose own JSON has a line break (a subclass writing its own) goes, with the
    rest of its batch, to `events`, one row each, as stores were written before.

    `exchanges` (their numbers and lines) go in the batch's row (migration 6): one row a
    commit, not one more per exchange, and one table's pages fewer in the log.

    On SQLite the row's key is its rowid, the run's number << 32 | its last event number
    (migration 7): no separate key b-tree to write a page of every commit. A run is numbered
    (`run_numbers`) by its first batch, whose insert finds no number and inserts nothing."""
    now, count = time.time(), count_of(events)
    if returning:
        row = tx.execute(
            "UPDATE runs SET last_seq = last_seq + ?, updated_at = ? WHERE id = ? RETURNING last_seq",
            (count, now, run_id),
        ).fetchone()
    else:
        # The events come numbered by the run's stamper, which follows the store: when the run's
        # row is at the number before the first, one UPDATE that checks so (in this write
        # transaction) numbers them as reading it first would; else it is read.
        follows = head_of(events[0])[1] - 1
        numbered_by_us = tx.execute(
            "UPDATE runs SET last_seq = ?, updated_at = ? WHERE id = ? AND last_seq = ?",
            (follows + count, now, run_id, follows),
        ).rowcount
        if numbered_by_us:
            row = {"last_seq": follows + count}
        else:
            row = tx.execute("SELECT last_seq + ? AS last_seq FROM runs WHERE id = ?", (count, run_id)).fetchone()
            if row is not None:
                tx.execute("UPDATE runs SET last_seq = ?, updated_at = ? WHERE id = ?", (row["last_seq"], now, run_id))
    if row is None:
        raise RunNotFound(run_id)
    last = int(row["last_seq"])
    first = last - count + 1
    told = numbered(events, run_id, first)
    parts = event_parts(told)
    if parts is not None:
        if not on_sqlite(tx):
            lines = "\n".join(line for _, line in exchanges) if exchanges else None
            last_n = exchanges[-1][0] if exchanges else None
            tx.execute(INSERT_BATCH, (run_id, last, first, b"\n".join(parts).decode(), lines, last_n))
        elif last >> SEQ_BITS:
            raise ValueError(f"run {run_id} has more events than a run store on SQLite keeps ({last})")
        else:
            for values in batch_rows(first, parts, exchanges):
                if not tx.execute(INSERT_NUMBERED_BATCH, (*values, run_id)).rowcount:
                    tx.execute("INSERT INTO run_numbers (run_id) VALUES (?)", (run_id,))  # its first batch
                    tx.execute(INSERT_NUMBERED_BATCH, (*values, run_id))
    else:
        rows = [(run_id, *event_row(e)) for e in flat(told)]
        tx.executemany(INSERT_EVENT, rows)
        if exchanges:
            insert_exchange_lines(tx, run_id, exchanges)
    return list(range(first, last + 1))


ROW_BYTES = 32 * 1024
"""On SQLite a commit's events and exchanges go in rows of about this size (`batch_rows`)."""


def batch_rows(
    first: int, parts: list[bytes], exchanges: Sequence[tuple[int, str]]
) -> list[tuple[int, int, str, str | None, int | None]]:
    """A commit's batch as the `event_batches` rows SQLite is given: each its last and first
    event numbers, its events' lines, its exchanges' lines and the last exchange's number. One
    row up to `ROW_BYTES`; beyond, the events and the exchanges are split evenly in order (every
    row holds an event: its key is its last; readers read a run's rows in order either way).
    SQLite builds a row's record in one allocation: one of a few hundred KB (a run that never
    waits commits 256 events with their exchanges, a kept run up to 1,024) was mapped fresh at
    each commit and faulted in page by page while the record was copied into it (perf: ~600 of a
    run's ~700 minor faults over a series were that copy in `sqlite3VdbeExec`; ~60 a run against
    ~12 in rows of 32 KB)."""
    size = sum(map(len, parts)) + sum(len(line) for _, line in exchanges)
    count = min(len(parts), size // ROW_BYTES + 1)
    n, m = len(parts), len(exchanges)
    rows = []
    for i in range(count):
        start, end = i * n // count, (i + 1) * n // count
        taken = exchanges[i * m // count : (i + 1) * m // count]
        lines = "\n".join(line for _, line in taken) if taken else None
        data = b"\n".join(parts[start:end]).decode()
        rows.append((first + end - 1, first + start, data, lines, taken[-1][0] if taken else None))
    return rows


# The head every event's JSON starts with (Event's own fields come first); anything else is parsed.
_HEAD = re.compile(r'\{"type":"([^"\\]*)","run_id":"[^"\\]*","seq":-?\d+,"ts":(-?[0-9][0-9.eE+-]*)[,}]')


def read_events(
    conn: Any, run_id: str, after_seq: int, limit: int | None, *, no_limit: int | None
) -> list[StoredEvent]:
    """A run's events after `after_seq`, in order, at most `limit`: rows of `events` (stores
    written before migration 4, runs marked interrupted) and lines of `event_batches`.
    `no_limit`: how the database spells LIMIT without one (SQLite -1, Postgres NULL)."""
    most = no_limit if limit is None else limit
    rows = conn.execute(
        "SELECT run_id, seq, type, ts, data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (run_id, after_seq, most),
    ).fetchall()
    out = [StoredEvent(**dict(row)) for row in rows]
    batches = conn.execute(
        READ_BATCHES[on_sqlite(conn)],
        (run_id, after_seq, most),  # each batch holds an event at least: `limit` batches are enough
    ).fetchall()
    if not batches:
        return out
    kept = len(out)
    for batch in batches:
        first = int(batch[0])
        skip = max(0, after_seq + 1 - first)
        lines = batch[1].split("\n")[skip:]
        if limit is not None:  # parse only what is returned (a durable step reads one event of a batch)
            lines = lines[: limit - (len(out) - kept)]
        for seq, line in enumerate(lines, first + skip):
            head = _HEAD.match(line)
            if head is not None:
                out.append(StoredEvent(run_id=run_id, seq=seq, type=head[1], ts=float(head[2]), data=line))
            else:
                data = json.loads(line)
                ts = data.get("ts")
                ts = float(ts) if isinstance(ts, int | float) else 0.0  # as the column would hold it
                out.append(StoredEvent(run_id=run_id, seq=seq, type=str(data.get("type")), ts=ts, data=line))
        if limit is not None and len(out) - kept >= limit:
            break
    if kept:
        out.sort(key=lambda event: event.seq)
    return out if limit is None else out[:limit]
