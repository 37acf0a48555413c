"""The event loop's commits never checkpoint the write-ahead log themselves: every few of them a
passive checkpoint is asked of one background thread (trace/checkpoint.py), which copies the log
into the database and never creates a store that is gone."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from loopwarden.events import EventStamper, NudgeInjected
from loopwarden.trace import checkpoint
from loopwarden.trace.store import RunStore
from loopwarden.trace.writer import RunWriter


async def test_commits_on_the_event_loop_ask_for_one_checkpoint_per_thousand_pages_or_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Path] = []
    monkeypatch.setattr(checkpoint, "request", asked.append)
    store = RunStore(tmp_path / "runs.db")
    store.create_run(run_id="r")
    writer, stamp = RunWriter(store, "r"), EventStamper("r")
    # A commit of one event changes two rows (the event, the run's last number): a commit's pages.
    commits = -(-checkpoint.PAGES // checkpoint.COMMIT_PAGES)
    for i in range(2 * commits):
        writer.events.append(stamp(NudgeInjected, turn=i, detector="cycle", text=f"nudge {i}"))
        await writer.flush()  # the store is free: each commit is made on this thread
        assert len(asked) == (i + 1) // commits
    assert asked == [store.path, store.path]
    assert store.last_seq("r") == 2 * commits


async def test_a_commit_of_many_rows_counts_for_their_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Path] = []
    monkeypatch.setattr(checkpoint, "request", asked.append)
    store = RunStore(tmp_path / "runs.db")
    store.create_run(run_id="r")
    writer, stamp = RunWriter(store, "r"), EventStamper("r")
    for i in range(checkpoint.PAGES * checkpoint.ROWS_PER_PAGE):
        writer.events.append(stamp(NudgeInjected, turn=i, detector="cycle", text=f"nudge {i}"))
    await writer.flush()
    assert asked == [store.path]  # one commit, as many pages as a thousand small ones would make


def _twenty_rows_in_the_log(db: Path) -> sqlite3.Connection:
    """A WAL database with no automatic checkpoint and 20 rows committed to its log; the open writer."""
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("CREATE TABLE t (x TEXT)")
    for i in range(20):
        writer.execute("INSERT INTO t VALUES (?)", (f"row {i}" * 100,))
    return writer


def test_a_checkpoint_copies_the_log_into_the_database(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    writer = _twenty_rows_in_the_log(db)
    assert _rows_in_the_database_file(db, tmp_path / "before.db") == 0  # all in the log so far
    checkpoint.checkpoint(db)
    assert _rows_in_the_database_file(db, tmp_path / "after.db") == 20
    writer.close()


def test_a_commit_made_while_the_checkpoint_copied_does_not_keep_the_log_from_starting_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The event loop keeps committing while the background thread checkpoints: SQLite rewinds the
    # log only for a commit whose transaction began with every frame copied. A passive pass alone
    # left the frames committed during it uncopied, so the log grew by every commit, for good.
    db = tmp_path / "runs.db"
    writer = _twenty_rows_in_the_log(db)
    connect = sqlite3.connect

    class Copier:  # the checkpoint's connection; a transaction commits while its passive pass copies
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.conn = connect(*args, **kwargs)  # type: ignore[arg-type]

        def execute(self, sql: str) -> sqlite3.Cursor:
            if "PASSIVE" not in sql:
                return self.conn.execute(sql)
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("INSERT INTO t VALUES ('committed meanwhile')")
            done = self.conn.execute(sql)
            writer.execute("COMMIT")
            return done

        def close(self) -> None:
            self.conn.close()

    monkeypatch.setattr(checkpoint.sqlite3, "connect", Copier)
    checkpoint.checkpoint(db)
    monkeypatch.setattr(checkpoint.sqlite3, "connect", connect)
    writer.execute("INSERT INTO t VALUES ('next')")  # written at the start of the log again
    with closing(sqlite3.connect(db)) as other:
        _, frames, _ = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert frames <= 3  # that commit's pages only, not the 20 commits' before it
    assert _rows_in_the_database_file(db, tmp_path / "copy.db") == 22
    writer.close()


def _rows_in_the_database_file(db: Path, copy: Path) -> int:
    """Rows of t in the database file alone (a copy without its log), 0 if not even the table is."""
    shutil.copyfile(db, copy)
    with closing(sqlite3.connect(copy)) as conn:
        try:
            return int(conn.execute("SELECT COUNT(*) FROM t").fetchone()[0])
        except sqlite3.OperationalError:  # no such table
            return 0


def test_a_store_that_is_gone_is_not_made_again(tmp_path: Path) -> None:
    checkpoint.checkpoint(tmp_path / "gone.db")
    checkpoint.checkpoint(tmp_path / "no-such-folder" / "gone.db")
    assert list(tmp_path.iterdir()) == []
