"""WAL checkpoints for commits made on the event loop's thread, run in one background thread.

The connection the event loop commits on (RunStore._append_now) never checkpoints: a checkpoint
copies the write-ahead log into the database file and syncs it, which can take milliseconds.
Once such commits have written about `PAGES` pages to the log the store asks for a checkpoint
here instead: a passive pass that neither waits for nor blocks readers and writers, then one
that holds the write lock for what was committed meanwhile so the log can start over (never
waiting: see `checkpoint`). A commit is durable without either (it is in the log). One
daemon thread serves every store of the process; it opens a short-lived connection per request,
in read-write mode only, so a store deleted meanwhile is never created again.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from pathlib import Path

PAGES = 4000
"""Pages written to the log (as `committed` estimates them) between two checkpoint requests.
Counted in pages, not commits: a run whose model answers at once commits hundreds of rows at a
time, one whose model makes it wait commits a call's few rows at a time, and a checkpoint costs
about the same either way (every 16 commits, as it was, was six checkpoints per 100-call run with
a waiting model). 4,000, not SQLite's own 1,000: a checkpoint has a cost of its own (a
connection, two `fdatasync`s: 3-4 ms of system time) beside the pages it copies (about as many
either way: a run's pages are mostly new ones), so one in four as many cost a run whose model
waits ~1 ms less of the checkpoint thread's CPU and an instant one ~0.2 ms (bench/README.md,
3 December 2026, third round). The log still starts over at every
checkpoint: its file grew to 13-15 MB in 80 runs of the bench (4 KB pages), not ~4-5 MB."""

COMMIT_PAGES = 6
"""Pages every commit writes to the log however few its rows: the database header (the file
grew), the run's row, the pages of the b-trees the new rows go to, and their parents."""

ROWS_PER_PAGE = 4
"""Rows to a page beyond those: an event is a few hundred bytes, a model exchange a few KB."""

RESTART_WAIT_MS = 50
"""How long the RESTART pass of a checkpoint waits for the write lock (and, holding it, for
readers still on the log); SQLite's busy handler polls with the GIL released. It gave up at once
before, and with a model that makes the run wait (a commit per call) it found the lock held in 12
of 28 checkpoints of 40 bench runs (load ~10; 0 of 28 with the wait): the log then grew past its
end by every commit until one succeeded (to 78 MB in 60 runs; 4-5 MB with the wait at 1,000
pages; bench/README.md, 3 December 2026, third round)."""

_requests: queue.SimpleQueue[Path] = queue.SimpleQueue()
_pending: set[Path] = set()
_lock = threading.Lock()
_thread: threading.Thread | None = None


class Pages:
    """What one store file's event-loop commits have written to the log since its last
    checkpoint request, shared by every RunStore of that file in the process. A store keeps its
    own (`pages`): counted per commit with no dict lookup by path (a Path hashes in Python)."""

    def __init__(self, path: Path) -> None:
        self.path, self.count = path, 0

    def committed(self, rows: int = 0) -> None:
        """Count a commit of `rows` changed rows made without checkpointing; once about `PAGES`
        pages have gone to the log a checkpoint is requested."""
        self.count += COMMIT_PAGES + rows // ROWS_PER_PAGE
        if self.count >= PAGES:
            self.count = 0
            request(self.path)


_pages: dict[Path, Pages] = {}


def pages(path: Path) -> Pages:
    """The page count of the store at `path` (the same object for every store of that path)."""
    with _lock:
        return _pages.setdefault(path, Pages(path))


def request(path: Path) -> None:
    """Checkpoint the store at `path` soon (at most one request per store is pending)."""
    global _thread
    with _lock:
        if path in _pending:
            return
        _pending.add(path)
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="loopwarden-wal-checkpoint", daemon=True)
            _thread.start()
    _requests.put(path)


def _serve() -> None:
    while True:
        path = _requests.get()
        with _lock:
            _pending.discard(path)
        checkpoint(path)


def checkpoint(path: Path) -> None:
    """Checkpoint the store at `path` so that the next commit writes the log from its start; a
    store that is gone or busy is left as it is.

    A passive checkpoint alone copies the log but never lets it start over while a process keeps
    committing: SQLite rewinds the log only for a commit whose transaction began with every frame
    copied, and commits made while this thread copied always come after it (the log of a run
    whose model answers at once, or a busy server's, grew by ~4 MB a run, never reused, each
    frame written past the end of the file). So the passive pass copies the bulk without blocking
    anyone, then RESTART copies what was committed meanwhile while it holds the write lock. It
    waits up to `RESTART_WAIT_MS` for that lock, then for readers still on the log; a commit of
    the event loop that finds the lock held meanwhile goes to a worker thread and waits the few
    milliseconds (trace/writer.py), and a RESTART that still finds either busy gives up until
    the next checkpoint."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=1.0)
    except (sqlite3.Error, OSError):
        return
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        conn.execute(f"PRAGMA busy_timeout = {RESTART_WAIT_MS}")
        conn.execute("PRAGMA wal_checkpoint(RESTART)")
    except sqlite3.Error:
        pass
    finally:
        conn.close()
