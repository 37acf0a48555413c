from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden.events import Event, EventStamper, GuardVerdict, UnknownEvent
from loopwarden.trace.migrations import MIGRATIONS, Migration
from loopwarden.trace.store import RunNotFound, RunStore


def _event(run_id: str, seq: int = 0, **extra: object) -> Event:
    return UnknownEvent(type="note", run_id=run_id, seq=seq, ts=1.0, **extra)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "runs.db")


def test_sqlite_settings_are_wal_and_busy_timeout(store: RunStore) -> None:
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._connection().execute("PRAGMA busy_timeout").fetchone()[0] >= 5000


def test_events_are_numbered_per_run_and_read_back_after_a_sequence(store: RunStore) -> None:
    a = store.create_run(params={"template": "lab"})
    b = store.create_run()
    assert a.id != b.id and len(a.id) == 32
    seqs = [store.append_event(a.id, _event(a.id, 99, n=i)) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    assert store.append_event(b.id, _event(b.id)) == 1
    after = store.events(a.id, after_seq=2)
    assert [e.seq for e in after] == [3, 4, 5]
    assert [getattr(e, "n", None) for e in after] == [2, 3, 4]
    assert store.get_run(a.id).last_seq == 5
    assert store.get_run(a.id).params == {"template": "lab"}


def test_typed_events_read_back_as_their_class(store: RunStore) -> None:
    run = store.create_run()
    stamp = EventStamper(run.id)
    store.append_event(run.id, stamp(GuardVerdict, turn=1, detector="repeat", action="stopped", reason="x"))
    (event,) = store.events(run.id)
    assert isinstance(event, GuardVerdict) and event.action == "stopped"


def test_unknown_run_is_refused(store: RunStore) -> None:
    with pytest.raises(RunNotFound):
        store.append_event("nope", _event("nope"))
    with pytest.raises(RunNotFound):
        store.set_status("nope", "running")
    assert store.find_run("nope") is None


@pytest.mark.parametrize(
    "returning",
    [
        pytest.param(True, marks=pytest.mark.skipif(sqlite3.sqlite_version_info < (3, 35), reason="no RETURNING")),
        False,
    ],
)
def test_events_are_numbered_alike_with_and_without_returning(store: RunStore, returning: bool) -> None:
    # UPDATE ... RETURNING (what Postgres runs; SQLite 3.35+ has it too) against SQLite's read-then-update.
    from loopwarden.trace.rows import insert_events

    run = store.create_run()
    with store._write() as tx:
        assert insert_events(tx, run.id, [_event(run.id, 7, n=i) for i in range(3)], returning=returning) == [1, 2, 3]
    with store._write() as tx:
        assert insert_events(tx, run.id, [_event("other", 0, n=3)], returning=returning) == [4]
    assert [(e.run_id, e.seq, e.model_extra) for e in store.events(run.id)] == [
        (run.id, i + 1, {"n": i}) for i in range(4)
    ]
    assert store.last_seq(run.id) == 4 and store.get_run(run.id).updated_at >= run.updated_at
    with pytest.raises(RunNotFound), store._write() as tx:
        insert_events(tx, "missing", [_event("missing")], returning=returning)


def test_status_timestamps_and_list(store: RunStore) -> None:
    run = store.create_run()
    running = store.set_status(run.id, "running")
    assert running.started_at is not None and running.finished_at is None
    done = store.set_status(run.id, "degraded", stop_reasons=["budget"], totals={"model_calls": 3}, message="m")
    assert done.finished and done.stop_reasons == ["budget"] and done.totals == {"model_calls": 3}
    other = store.create_run()
    assert [r.id for r in store.list_runs()] == [other.id, run.id]
    assert [r.id for r in store.list_runs(status="degraded")] == [run.id]
    assert store.count_runs(statuses=frozenset({"queued"})) == 1


def test_migrations_are_ordered_and_applied_once(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    RunStore(path)
    extra = Migration(len(MIGRATIONS) + 1, "add a column", "ALTER TABLE runs ADD COLUMN owner TEXT;")
    again = RunStore(path, migrations=(*MIGRATIONS, extra))
    assert again.schema_version() == extra.version
    # Reopening with the same list applies nothing twice (ALTER TABLE would fail if re-run).
    assert RunStore(path, migrations=(*MIGRATIONS, extra)).schema_version() == extra.version


def test_a_store_made_before_exchanges_had_a_rowid_table_keeps_them_through_the_migration(tmp_path: Path) -> None:
    from loopwarden.models.base import ModelReply, ModelRequest
    from loopwarden.trace.exchanges import load_exchanges

    path = tmp_path / "runs.db"
    old = RunStore(path, migrations=MIGRATIONS[:2])  # as stores in the field were made
    old.create_run(run_id="r", status="running")
    requests = [ModelRequest(messages=[{"role": "user", "content": f"question {i} " + "x" * 3000}]) for i in range(3)]
    with old._write() as tx:  # as append_exchange wrote them then: the request whole
        for i, request in enumerate(requests):
            tx.execute(
                "INSERT INTO model_exchanges (run_id, n, model, request, reply, ts) VALUES ('r', ?, 'm', ?, ?, 0)",
                (i + 1, json.dumps(request.model_dump(mode="json")), ModelReply(text=f"answer {i}").model_dump_json()),
            )
    old.close()
    new = RunStore(path)
    assert new.schema_version() == len(MIGRATIONS)
    assert [(x.request, x.reply.text if x.reply else None) for x in load_exchanges(new, "r")] == [
        (request, f"answer {i}") for i, request in enumerate(requests)
    ]
    table = new._connection().execute("SELECT sql FROM sqlite_master WHERE name = 'model_exchanges'").fetchone()[0]
    assert "WITHOUT ROWID" not in table.upper() and "PRIMARY KEY (run_id, n)" in table
    with pytest.raises(sqlite3.IntegrityError):  # the key is still unique
        new._connection().execute("INSERT INTO model_exchanges (run_id, n, request, ts) VALUES ('r', 1, '{}', 0)")


def test_interrupted_on_start_keeps_events_and_appends_a_terminal_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    first = RunStore(path)
    running = first.create_run()
    first.set_status(running.id, "running")
    for i in range(3):
        first.append_event(running.id, _event(running.id, n=i))
    first.add_approval(running.id, "c1", "delete_file", {"path": "x"})
    finished = first.create_run()
    first.set_status(finished.id, "completed")
    first.close()

    second = RunStore(path)
    assert second.mark_interrupted_on_start() == [running.id]
    run = second.get_run(running.id)
    assert run.status == "interrupted" and run.finished_at is not None
    events = second.events(running.id)
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert [getattr(e, "n", None) for e in events[:3]] == [0, 1, 2]
    assert events[-1].type == "run_interrupted"
    assert second.get_run(finished.id).status == "completed"
    assert second.approvals(running.id)[0].status == "expired"
    assert second.mark_interrupted_on_start() == []


def test_approval_is_decided_once(store: RunStore) -> None:
    run = store.create_run()
    store.add_approval(run.id, "call-1", "write_file", {"path": "a.txt"}, reason="writes outside out/")
    store.add_approval(run.id, "call-1", "write_file", {"path": "other"})  # duplicate: ignored
    assert [a.arguments for a in store.approvals(run.id, status="pending")] == [{"path": "a.txt"}]
    decided = store.decide_approval(run.id, "call-1", approve=False, by="alice", note="no")
    assert decided is not None and decided.status == "denied" and decided.decided_by == "alice"
    assert store.decide_approval(run.id, "call-1", approve=True) is None
    assert store.decide_approval(run.id, "missing", approve=True) is None
    assert store.approval(run.id, "call-1").status == "denied"  # type: ignore[union-attr]


def test_artifacts_upsert(store: RunStore, tmp_path: Path) -> None:
    run = store.create_run()
    store.add_artifact(run.id, "report.md", tmp_path / "report.md", media_type="text/markdown", size=3)
    store.add_artifact(run.id, "report.md", tmp_path / "report.md", media_type="text/markdown", size=7)
    store.add_artifact(run.id, "events.jsonl", tmp_path / "e", media_type="application/x-ndjson", size=1)
    assert [(a.name, a.size) for a in store.artifacts(run.id)] == [("events.jsonl", 1), ("report.md", 7)]
    assert store.artifact(run.id, "nope") is None


def test_concurrent_thread_writers_never_see_database_is_locked(store: RunStore) -> None:
    run = store.create_run()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(40):
                store.append_event(run.id, _event(run.id))
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [e.seq for e in store.events(run.id)] == list(range(1, 321))


def _process_writer(path: str, run_id: str, n: int) -> None:
    store = RunStore(path)
    for _ in range(n):
        store.append_event(run_id, _event(run_id))


def test_concurrent_process_writers_keep_one_gapless_sequence(store: RunStore) -> None:
    run = store.create_run()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_process_writer, args=(str(store.path), run.id, 30)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert [e.seq for e in store.events(run.id)] == list(range(1, 121))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(), args=st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(), st.none())))
def test_any_event_content_round_trips(store: RunStore, text: str, args: dict[str, object]) -> None:
    run = store.create_run()
    store.append_event(run.id, _event(run.id, text=text, args=args))
    (event,) = store.events(run.id)
    assert getattr(event, "text", None) == text and getattr(event, "args", None) == args


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(st.integers(1, 4), st.integers(-2, 12)), min_size=1, max_size=8))
def test_a_batch_is_numbered_after_the_runs_last_whatever_its_events_say(
    store: RunStore, batches: list[tuple[int, int]]
) -> None:
    # Each batch's events numbered from `start` on, as a stamper of their own would: right when
    # `start` follows the run's last (one writer), else not (two writers of a run, a stamper that
    # started elsewhere): either way the store numbers them on from its last, with no gap or repeat.
    run = store.create_run()
    told = 0
    for n, start in batches:
        events = [_event(run.id, seq, n=told + i) for i, seq in enumerate(range(start, start + n))]
        assert store.append_events(run.id, events) == list(range(told + 1, told + n + 1))
        told += n
        assert store.last_seq(run.id) == told
    stored = store.events(run.id)
    assert [e.seq for e in stored] == list(range(1, told + 1))
    assert [getattr(e, "n", None) for e in stored] == list(range(told))


def test_two_writers_of_one_run_never_share_a_number(store: RunStore) -> None:
    run = store.create_run()
    ours, theirs = EventStamper(run.id), EventStamper(run.id)  # each starts at 0: they collide
    for i in range(4):
        stamper = ours if i % 2 == 0 else theirs
        store.append_events(run.id, [stamper(UnknownEvent, type="note", n=i) for _ in range(3)])
    assert [e.seq for e in store.events(run.id)] == list(range(1, 13)) and store.last_seq(run.id) == 12


def test_a_store_a_newer_loopwarden_wrote_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    # Read by an older version, a newer layout would look empty (migration 4 moved events into
    # batch rows that version 3 never reads): refused by name instead, the store untouched.
    from loopwarden.errors import ConfigError

    path = tmp_path / "runs.db"
    extra = Migration(len(MIGRATIONS) + 1, "add a column", "ALTER TABLE runs ADD COLUMN owner TEXT;")
    newer = RunStore(path, migrations=(*MIGRATIONS, extra))
    newer.create_run(run_id="r", status="running")
    newer.close()
    with pytest.raises(ConfigError) as refused:
        RunStore(path)
    assert f"schema version {extra.version}, newer than this loopwarden's {len(MIGRATIONS)}" in str(refused.value)
    assert str(path) in str(refused.value)
    again = RunStore(path, migrations=(*MIGRATIONS, extra))
    assert again.schema_version() == extra.version and again.get_run("r").status == "running"
