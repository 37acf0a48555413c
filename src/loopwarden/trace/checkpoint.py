"""WAL checkpoints for commits made on the event loop's thread, run in one background thread.

The connection the event loop commits on (RunStore._write_now) never checkpoints: a checkpoint
copies the write-ahead log into the database file and syncs it, which can take milliseconds.
Every `EVERY` such commits the store asks for a passive checkpoint here instead; it neither waits
for nor blocks readers and writers, and a commit is durable without it (it is in the log). One
daemon thread serves every store of the process; it opens a short-lived connection per request,
in read-write mode only, so a store deleted meanwhile is never created again.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from pathlib import Path

EVERY = 16
"""Commits on event loop connections between two checkpoint requests (the default automatic
checkpoint is at 1,000 pages; a batch of events is a few pages, and a short log is a cheap one
to append to)."""

_requests: queue.SimpleQueue[Path] = queue.SimpleQueue()
_pending: set[Path] = set()
_lock = threading.Lock()
_thread: threading.Thread | None = None


_commits: dict[Path, int] = {}


def committed(path: Path) -> None:
    """Count a commit on the store at `path` made without checkpointing; every `EVERY` of them
    (whichever RunStore of the process made them) a checkpoint is requested."""
    count = _commits[path] = _commits.get(path, 0) + 1
    if count % EVERY == 0:
        request(path)


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
    """A passive checkpoint of the store at `path`; a store that is gone or busy is left as it is."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=1.0)
    except (sqlite3.Error, OSError):
        return
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    except sqlite3.Error:
        pass
    finally:
        conn.close()
