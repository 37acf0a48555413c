"""The rows a run's writes are made of, written inside a transaction the caller holds (a
`RunStore._write()` connection, or a Postgres one): shared by the SQLite and Postgres stores and
by the trace writer, which puts a run's opening, its events and its closing in the transactions
it already makes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ..errors import RunNotFound
from ..events import Event
from .records import FINAL_STATUSES, RunStatus


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


def insert_events(tx: Any, run_id: str, events: Sequence[Event], *, returning: bool) -> list[int]:
    """Number `events` after the run's last and insert them, the run's row moved on first.
    `returning`: in one statement that returns the new last number (UPDATE ... RETURNING: on
    Postgres one round trip fewer than reading it first, and the update locks the run's row as
    SELECT ... FOR UPDATE would). SQLite reads then updates: there RETURNING builds an ephemeral
    table per statement, about 12,000 instructions a commit more than the two statements
    (callgrind, 1,000 commits)."""
    now = time.time()
    if returning:
        row = tx.execute(
            "UPDATE runs SET last_seq = last_seq + ?, updated_at = ? WHERE id = ? RETURNING last_seq",
            (len(events), now, run_id),
        ).fetchone()
    else:
        row = tx.execute("SELECT last_seq + ? AS last_seq FROM runs WHERE id = ?", (len(events), run_id)).fetchone()
        if row is not None:
            tx.execute("UPDATE runs SET last_seq = ?, updated_at = ? WHERE id = ?", (row["last_seq"], now, run_id))
    if row is None:
        raise RunNotFound(run_id)
    last = int(row["last_seq"])
    first = last - len(events) + 1
    rows = []
    for seq, event in enumerate(events, first):
        if event.seq != seq or event.run_id != run_id:
            event = event.model_copy(update={"seq": seq, "run_id": run_id})
        rows.append((run_id, seq, event.type, event.ts, event.to_json()))
    tx.executemany("INSERT INTO events (run_id, seq, type, ts, data) VALUES (?, ?, ?, ?, ?)", rows)
    return list(range(first, last + 1))
