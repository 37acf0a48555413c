"""The event loop's commits never checkpoint the write-ahead log themselves: every few of them a
passive checkpoint is asked of one background thread (trace/checkpoint.py), which copies the log
into the database and never creates a store that is gone."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from loopwarden.events import EventStamper, NudgeInjected
from loopwarden.trace import checkpoint
from loopwarden.trace.store import RunStore
from loopwarden.trace.writer import RunWriter


def _run_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunStore, RunWriter, list[Path]]:
    """A store with run "r", its writer, and the checkpoint requests its commits make (kept, not served)."""
    asked: list[Path] = []
    monkeypatch.setattr(checkpoint, "request", asked.append)
    store = RunStore(tmp_path / "runs.db")
    store.create_run(run_id="r")
    return store, RunWriter(store, "r"), asked


def _nudge(stamp: EventStamper, i: int) -> NudgeInjected:
    return stamp(NudgeInjected, turn=i, detector="cycle", text=f"nudge {i}")


async def test_commits_on_the_event_loop_ask_for_one_checkpoint_per_pages_pages_or_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, writer, asked = _run_writer(tmp_path, monkeypatch)
    stamp = EventStamper("r")
    # A commit of one event changes two rows (the event, the run's last number): a commit's pages.
    commits = -(-checkpoint.PAGES // checkpoint.COMMIT_PAGES)
    for i in range(2 * commits):
        writer.events.append(_nudge(stamp, i))
        await writer.flush()  # the store is free: each commit is made on this thread
        assert len(asked) == (i + 1) // commits
    assert asked == [store.path, store.path]
    assert store.last_seq("r") == 2 * commits


async def test_a_commit_of_many_rows_counts_for_their_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, writer, asked = _run_writer(tmp_path, monkeypatch)
    stamp = EventStamper("r")
    for i in range(checkpoint.PAGES * checkpoint.ROWS_PER_PAGE):
        writer.events.append(_nudge(stamp, i))
    await writer.flush()
    assert asked == [store.path]  # one commit, as many pages as a thousand small ones would make


async def test_the_log_starts_over_at_each_checkpoint_so_it_never_holds_more_than_pages_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checkpoints are asked for seldom (PAGES is four times SQLite's own 1,000) to cost a run less
    # of them; the log must still start over at each, not grow for as long as a process commits.
    store, writer, asked = _run_writer(tmp_path, monkeypatch)
    stamp = EventStamper("r")
    page = int(store._connection().execute("PRAGMA page_size").fetchone()[0])
    wal, largest = Path(f"{store.path}-wal"), 0
    commits = 3 * -(-checkpoint.PAGES // checkpoint.COMMIT_PAGES)
    for i in range(commits):
        writer.events.append(_nudge(stamp, i))
        await writer.flush()
        largest = max(largest, wal.stat().st_size)
        while asked:  # what the background thread does, at once (commits go on after it)
            checkpoint.checkpoint(asked.pop())
    assert len(asked) == 0 and store.last_seq("r") == commits
    # The log is frames of a header and a page after its own 32-byte header: at most what the
    # commits between two checkpoints wrote, which the estimate (6 pages a commit) never undercounts.
    assert 0 < largest <= 32 + (checkpoint.PAGES + checkpoint.COMMIT_PAGES) * (24 + page)
    assert len(store.events("r")) == commits


def _twenty_rows_in_the_log(db: Path) -> sqlite3.Connection:
    """A WAL database with no automatic checkpoint and 20 rows committed to its log; the open writer."""
    writer = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
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
    assert _frames_after_a_checkpoint_with_commits_during_it(tmp_path, monkeypatch) <= 3


def test_the_log_starts_over_when_a_writer_lets_go_of_the_lock_while_the_restart_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With a model that makes the run wait the event loop commits every call, so the RESTART
    # often finds the write lock held: giving up at once, the log grew past its end by every
    # commit until a later checkpoint found it free. It waits (RESTART_WAIT_MS; longer here, so
    # that a loaded machine cannot make the writer's 20 ms look like more).
    monkeypatch.setattr(checkpoint, "RESTART_WAIT_MS", 30_000)
    assert _frames_after_a_checkpoint_with_commits_during_it(tmp_path, monkeypatch, held_at_restart=0.02) <= 3


def _frames_after_a_checkpoint_with_commits_during_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_at_restart: float | None = None
) -> int:
    """Checkpoint a log of 20 rows while a writer commits a row during the passive pass and, with
    `held_at_restart`, holds the write lock as the RESTART begins and for that many seconds
    (committing a row then: its transaction began before the log was all copied, so it cannot
    start the log over itself); then commit once more and return the frames in the log: that
    commit's pages alone (3 at most) if the log started over, every earlier commit's too if not."""
    db = tmp_path / "runs.db"
    writer = _twenty_rows_in_the_log(db)
    connect = sqlite3.connect
    releases: list[threading.Timer] = []

    class Copier:  # the checkpoint's connection
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.conn = connect(*args, **kwargs)  # type: ignore[arg-type]

        def execute(self, sql: str) -> sqlite3.Cursor:
            if "PASSIVE" in sql:
                writer.execute("BEGIN IMMEDIATE")
                writer.execute("INSERT INTO t VALUES ('committed meanwhile')")
                done = self.conn.execute(sql)
                writer.execute("COMMIT" if held_at_restart is None else "INSERT INTO t VALUES ('and then')")
                return done
            if "RESTART" in sql and held_at_restart is not None:
                releases.append(threading.Timer(held_at_restart, writer.execute, ("COMMIT",)))
                releases[0].start()
            return self.conn.execute(sql)

        def close(self) -> None:
            self.conn.close()

    monkeypatch.setattr(checkpoint.sqlite3, "connect", Copier)
    checkpoint.checkpoint(db)
    monkeypatch.setattr(checkpoint.sqlite3, "connect", connect)
    for release in releases:
        release.join()
    writer.execute("INSERT INTO t VALUES ('next')")  # written at the start of the log again
    with closing(sqlite3.connect(db)) as other:
        _, frames, _ = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert _rows_in_the_database_file(db, tmp_path / "copy.db") == 22 + (held_at_restart is not None)
    writer.close()
    return int(frames)


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
