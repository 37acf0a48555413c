"""Ordered schema migrations of the run store. Append new ones at the end with the next
version number; never edit one that has shipped (stores in the field have already applied it)."""

from __future__ import annotations

import sqlite3
from typing import NamedTuple


class Migration(NamedTuple):
    version: int
    name: str
    sql: str
    postgres: str | None = None
    """The Postgres statements, where they are not the SQLite ones in Postgres's dialect."""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs, events, artifacts, approvals",
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL DEFAULT 'report',
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            params TEXT NOT NULL DEFAULT '{}',
            data_dir TEXT,
            out_dir TEXT,
            last_seq INTEGER NOT NULL DEFAULT 0,
            progress TEXT,
            stop_reasons TEXT NOT NULL DEFAULT '[]',
            totals TEXT,
            message TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX runs_created ON runs (created_at);
        CREATE INDEX runs_status ON runs (status);
        CREATE TABLE events (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            ts REAL NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID;
        CREATE TABLE artifacts (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            path TEXT NOT NULL,
            size INTEGER NOT NULL,
            media_type TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (run_id, name)
        );
        CREATE TABLE approvals (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            call_id TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL DEFAULT 'null',
            reason TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'pending',
            created_at REAL NOT NULL,
            decided_at REAL,
            decided_by TEXT,
            note TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (run_id, call_id)
        );
        """,
    ),
    Migration(
        2,
        "model exchanges: what each model call was sent and answered",
        """
        CREATE TABLE model_exchanges (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            n INTEGER NOT NULL,
            base INTEGER NOT NULL DEFAULT 0,
            prefix INTEGER NOT NULL DEFAULT 0,
            model TEXT NOT NULL DEFAULT '',
            request TEXT NOT NULL,
            reply TEXT,
            error TEXT,
            ts REAL NOT NULL,
            PRIMARY KEY (run_id, n)
        ) WITHOUT ROWID;
        """,
    ),
    Migration(
        3,
        "model exchanges in a rowid table: a request of a few KB fits its page",
        # WITHOUT ROWID keeps rows in an index b-tree, where a row over ~1 KB (most requests)
        # spills into an overflow page: every exchange wrote a page more. The key stays unique.
        """
        CREATE TABLE model_exchanges_v3 (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            n INTEGER NOT NULL,
            base INTEGER NOT NULL DEFAULT 0,
            prefix INTEGER NOT NULL DEFAULT 0,
            model TEXT NOT NULL DEFAULT '',
            request TEXT NOT NULL,
            reply TEXT,
            error TEXT,
            ts REAL NOT NULL,
            PRIMARY KEY (run_id, n)
        );
        INSERT INTO model_exchanges_v3 (run_id, n, base, prefix, model, request, reply, error, ts)
            SELECT run_id, n, base, prefix, model, request, reply, error, ts FROM model_exchanges;
        DROP TABLE model_exchanges;
        ALTER TABLE model_exchanges_v3 RENAME TO model_exchanges;
        """,
        postgres="SELECT 1;",  # Postgres has no WITHOUT ROWID tables: nothing to change
    ),
    Migration(
        4,
        "events in batches: the events of one commit in one row, their JSON one a line",
        # One insert a commit, not one per event (most of SQLite's share of a traced run). Keyed
        # by the batch's last number, so "events after n" is a range of the key. Rows of `events`
        # stay where they are and are read with these (trace/rows.py read_events).
        """
        CREATE TABLE event_batches (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            last_seq INTEGER NOT NULL,
            first_seq INTEGER NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, last_seq)
        );
        """,
    ),
    Migration(
        5,
        "model exchanges: the offered tools written once, rows that offer the same point at that row",
        # The tools list was ~9% of what a traced run wrote (~290 bytes every model call, the same
        # every call). NULL: the request holds its own "tools" (every row written before).
        """
        ALTER TABLE model_exchanges ADD COLUMN tools_from INTEGER;
        """,
    ),
    Migration(
        6,
        "model exchanges in the events' batch rows: a commit's exchanges, one a line",
        # Each table a commit adds a row to costs it a leaf page and a page of the table's key in
        # the log (~15,000-20,000 instructions a page: checksums, frames), and a row per exchange
        # had to be made too: a commit of a model that makes the run wait wrote ~7 pages. The
        # exchanges now ride in their events' row; `last_n` is the number of its last one.
        # Rows of `model_exchanges` stay and are read with these (trace/exchanges.py
        # exchange_rows); exchanges committed without events still go there.
        """
        ALTER TABLE event_batches ADD COLUMN exchanges TEXT;
        ALTER TABLE event_batches ADD COLUMN last_n INTEGER;
        """,
    ),
    Migration(
        7,
        "event batches keyed by their rowid: the run's number and the batch's last event number",
        # A rowid table keyed (run_id, last_seq) keeps that key in an index b-tree of its own, a
        # page more in the log every commit (about 1 in 5 of a commit's pages with a model that
        # makes the run wait: one commit per call). Keyed by `batch` (INTEGER PRIMARY KEY: the
        # rowid itself), run number << 32 | last_seq, a run's batches are a range of the table's
        # own b-tree. A run is numbered at its first batch (`run_numbers`, written once a run);
        # the trigger takes a run's batches with it, so a number freed by a deleted run that is
        # given again finds none. Postgres keeps its table (`run_id, last_seq`).
        """
        CREATE TABLE run_numbers (
            number INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL UNIQUE REFERENCES runs (id) ON DELETE CASCADE
        );
        INSERT INTO run_numbers (run_id) SELECT DISTINCT run_id FROM event_batches ORDER BY run_id;
        CREATE TABLE event_batches_v7 (
            batch INTEGER PRIMARY KEY,
            first_seq INTEGER NOT NULL,
            data TEXT NOT NULL,
            exchanges TEXT,
            last_n INTEGER
        );
        INSERT INTO event_batches_v7 (batch, first_seq, data, exchanges, last_n)
            SELECT (r.number << 32) | b.last_seq, b.first_seq, b.data, b.exchanges, b.last_n
            FROM event_batches AS b JOIN run_numbers AS r ON r.run_id = b.run_id;
        DROP TABLE event_batches;
        ALTER TABLE event_batches_v7 RENAME TO event_batches;
        CREATE TRIGGER run_numbers_deleted AFTER DELETE ON run_numbers BEGIN
            DELETE FROM event_batches WHERE batch >= OLD.number << 32 AND batch < (OLD.number + 1) << 32;
        END;
        """,
        postgres="SELECT 1;",
    ),
)


def split_statements(sql: str) -> list[str]:
    """A migration's statements, one by one (each is executed on its own)."""
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
