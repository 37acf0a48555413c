"""`Agent(trace="runs.db")` opens the store of a file once and keeps it for the next Agent of the
same file (trace/tracing.py open_store), only while the path is still that file: a store whose
file was deleted or replaced is dropped, and dropping (closing) it leaves the new file whole."""

from __future__ import annotations

import gc
import os
import sqlite3
from pathlib import Path

import pytest

from loopwarden import Agent, FunctionModel
from loopwarden.trace import tracing
from loopwarden.trace.store import RunStore
from loopwarden.trace.tracing import KEPT_STORES, Tracer, resolve_trace


def _store(path: Path) -> RunStore:
    tracer = resolve_trace(str(path))
    assert isinstance(tracer, Tracer) and tracer.store is not None
    return tracer.store


async def test_agents_of_one_file_share_its_store_and_each_run_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    agents = [Agent(FunctionModel(lambda request: "done"), [], trace=str(path)) for _ in range(2)]
    assert isinstance(agents[0].trace, Tracer) and isinstance(agents[1].trace, Tracer)
    assert agents[0].trace.store is agents[1].trace.store is _store(tmp_path / "." / "runs.db")
    results = [await agent.run("go") for agent in agents]
    stored = RunStore(path)
    assert {run.id for run in stored.list_runs()} == {result.run_id for result in results}
    assert all(stored.get_run(result.run_id).status == "completed" for result in results)


def test_a_replaced_file_gets_a_new_store_and_closing_the_old_one_leaves_the_new_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    old = _store(path)
    old.create_run(run_id="old")
    assert _store(path) is old
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    assert _store(path) is not old  # deleted: a new store makes the file again
    os.unlink(path)  # replaced, with its log still open and not checkpointed
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode = WAL")
    other.execute("PRAGMA wal_autocheckpoint = 0")
    other.execute("CREATE TABLE kept (n INTEGER)")
    other.executemany("INSERT INTO kept VALUES (?)", [(n,) for n in range(100)])
    assert os.path.getsize(f"{path}-wal") > 0
    new = _store(path)
    assert new is not old
    new.create_run(run_id="new")
    old.close()  # the old file's connections: the log by the new file's name is not theirs
    del old
    gc.collect()
    assert os.path.exists(f"{path}-wal")
    fresh = sqlite3.connect(path)
    assert fresh.execute("SELECT COUNT(*) FROM kept").fetchone()[0] == 100
    assert [row[0] for row in fresh.execute("SELECT id FROM runs")] == ["new"]
    fresh.close()
    other.close()


def test_only_the_most_recently_used_stores_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_stores", {})
    first = _store(tmp_path / "0.db")
    for n in range(1, KEPT_STORES):
        _store(tmp_path / f"{n}.db")
    assert _store(tmp_path / "0.db") is first  # used again: now the most recent
    _store(tmp_path / "new.db")
    assert _store(tmp_path / "0.db") is first
    assert len(tracing._stores) == KEPT_STORES
    assert str(tmp_path / "1.db") not in tracing._stores  # the least recently used went
