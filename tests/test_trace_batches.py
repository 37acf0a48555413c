"""Events stored in batches (migration 4: a commit's events in one `event_batches` row, their
JSON one a line) read back as rows did: any "after n" and limit, on SQLite and Postgres, mixed
with the `events` rows of stores written before and of runs marked interrupted."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable_kit import fresh_database
from loopwarden.events import Event, UnknownEvent
from loopwarden.trace.migrations import MIGRATIONS
from loopwarden.trace.store import RunStore

SIZES = (3, 1, 5, 2)  # the batches' sizes: 11 events


def _event(run_id: str, n: int, type: str = "note") -> Event:
    return UnknownEvent(type=type, run_id=run_id, seq=0, ts=1_764_676_543.25 + n, n=n, text=f"line\n{n}")


class Indented(UnknownEvent):
    """An event that writes its own JSON, with line breaks in it."""

    def model_dump_json(self, **kwargs: Any) -> str:
        return super().model_dump_json(indent=2)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    if request.param == "sqlite":
        store = RunStore(tmp_path / "runs.db")
        yield store
        store.close()
        return
    pytest.importorskip("psycopg", reason="the durable extra is not installed")
    from loopwarden.trace.pgstore import PostgresRunStore

    with fresh_database() as url:
        store = PostgresRunStore(url)
        yield store
        store.close()


def test_batched_events_read_back_after_any_sequence_with_any_limit(store: RunStore) -> None:
    run = store.create_run()
    n = 0
    for size in SIZES:
        assert store.append_events(run.id, [_event(run.id, n + i) for i in range(size)]) == list(
            range(n + 1, n + size + 1)
        )
        n += size
    table = store._connection().execute("SELECT COUNT(*) FROM event_batches").fetchone()[0]
    assert table == len(SIZES)  # a row a commit
    everything = store.event_rows(run.id)
    assert [(e.seq, e.type, e.ts) for e in everything] == [(i + 1, "note", 1_764_676_543.25 + i) for i in range(n)]
    for row in everything:  # the JSON carries the number the store gave it; line breaks escaped
        assert json.loads(row.data) == {**_event(run.id, row.seq - 1).model_dump(), "seq": row.seq, "run_id": run.id}
    for after in range(n + 2):
        for limit in (None, 1, 2, 4, 20):
            got = store.event_rows(run.id, after, limit=limit)
            assert got == everything[after:][:limit], (after, limit)
    assert [e.model_extra for e in store.events(run.id, 9)] == [{"n": i, "text": f"line\n{i}"} for i in (9, 10)]


def test_an_event_whose_own_json_has_line_breaks_is_kept_with_its_batch_in_rows(store: RunStore) -> None:
    run = store.create_run()
    plain = [_event(run.id, 0), _event(run.id, 1)]
    odd = Indented(type="indented", run_id=run.id, seq=0, ts=5.0, n=2)
    store.append_events(run.id, [plain[0]])
    store.append_events(run.id, [plain[1], odd])  # this batch cannot be split by lines: rows of `events`
    store.append_events(run.id, [_event(run.id, 3)])
    rows = store.event_rows(run.id)
    assert [(e.seq, e.type) for e in rows] == [(1, "note"), (2, "note"), (3, "indented"), (4, "note")]
    assert "\n" in rows[2].data and json.loads(rows[2].data)["n"] == 2
    assert [(e.seq, e.type) for e in store.event_rows(run.id, 1, limit=2)] == [(2, "note"), (3, "indented")]
    assert store._connection().execute("SELECT COUNT(*) FROM events").fetchone()[0] == 2


def test_a_type_the_head_pattern_does_not_take_is_read_from_the_json(store: RunStore) -> None:
    run = store.create_run()
    store.append_events(run.id, [_event(run.id, 0, type='a "quoted" \\ type'), _event(run.id, 1, type="é")])
    rows = store.event_rows(run.id)
    assert [(e.type, e.ts) for e in rows] == [('a "quoted" \\ type', 1_764_676_543.25), ("é", 1_764_676_544.25)]


def test_a_store_written_before_batches_keeps_its_events_and_numbers_on(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    old = RunStore(path, migrations=MIGRATIONS[:3])  # as stores in the field were made
    run = old.create_run(status="running")
    with old._write() as tx:  # the rows an earlier version wrote: one per event
        for seq in (1, 2, 3):
            data = {**_event(run.id, seq - 1).model_dump(), "seq": seq, "run_id": run.id}
            tx.execute(
                "INSERT INTO events (run_id, seq, type, ts, data) VALUES (?, ?, 'note', ?, ?)",
                (run.id, seq, data["ts"], json.dumps(data)),
            )
        tx.execute("UPDATE runs SET last_seq = 3 WHERE id = ?", (run.id,))
    old.close()
    with pytest.raises(sqlite3.OperationalError):
        sqlite3.connect(path).execute("SELECT 1 FROM event_batches")
    new = RunStore(path)
    assert new.schema_version() == len(MIGRATIONS)
    assert new.append_events(run.id, [_event(run.id, 3), _event(run.id, 4)]) == [4, 5]
    assert new.mark_interrupted_on_start() == [run.id]  # a row of `events` after a batch
    rows = new.event_rows(run.id)
    assert [(e.seq, e.type) for e in rows] == [(i, "note") for i in range(1, 6)] + [(6, "run_interrupted")]
    assert [json.loads(e.data)["n"] for e in rows[:5]] == [0, 1, 2, 3, 4]
    for after in range(7):
        for limit in (None, 1, 2, 3):
            assert new.event_rows(run.id, after, limit=limit) == rows[after:][:limit], (after, limit)
    assert [e.seq for e in new.events(run.id, 2)] == [3, 4, 5, 6]


def test_event_lines_are_each_events_to_json_and_never_split_inside_one() -> None:
    from loopwarden.trace.rows import event_lines

    odd = "".join(map(chr, range(32))) + "\u2028\u2029\x7f\ud7ff\ue000 é 漢 🙂"
    events: list[Event] = [
        UnknownEvent(type="note", run_id="r", seq=1, ts=0.5, text=odd, raw=odd.encode("utf-8"), keys={odd: [odd]}),
        _event("r", 2),
        Indented(type="indented", run_id="r", seq=3, ts=1.0, n=3).model_copy(update={"seq": 3}),
    ]
    data = event_lines(events[:2])
    assert data is not None and data.split("\n") == [e.to_json() for e in events[:2]]
    assert event_lines(events) is None  # its own JSON has line breaks: kept in rows of `events`
    assert event_lines([]) == ""


class Terse(UnknownEvent):
    """An event that writes its own JSON on one line (without its time)."""

    def model_dump_json(self, **kwargs: Any) -> str:
        return super().model_dump_json(exclude={"ts"})


def test_event_lines_write_each_class_as_its_to_json_does_in_any_order() -> None:
    # What a class writes is looked up once per class: a subclass that writes its own JSON and
    # its base that does not, met in either order, each keep their own bytes.
    from loopwarden.trace.rows import event_lines

    for order in ((Terse, UnknownEvent), (UnknownEvent, Terse)):
        events = [cls(type="note", run_id="r", seq=n, ts=0.5 + n, n=n) for n in range(4) for cls in order]
        data = event_lines(events)
        assert data is not None and data.split("\n") == [e.to_json() for e in events]
        assert ['"ts"' in line for line in data.split("\n")] == [cls is UnknownEvent for _ in range(4) for cls in order]


def _old_batches(store: RunStore, run_id: str) -> None:
    """A run's batches as the previous version wrote them (migration 6: keyed run id, last number),
    with exchanges 1-4 in three of its four batches."""
    from loopwarden.trace.rows import event_lines, exchange_line

    n = 0
    with store._write() as tx:
        for size, numbers in zip(SIZES, ([1], [], [2, 3], [4]), strict=True):
            events = [_event(run_id, n + i).model_copy(update={"seq": n + i + 1}) for i in range(size)]
            lines = [exchange_line(x, 0, 0, '"m"', 1.5, None, '{"messages":[]}', f'"reply {x}"', None) for x in numbers]
            tx.execute(
                "INSERT INTO event_batches (run_id, last_seq, first_seq, data, exchanges, last_n)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, n + size, n + 1, event_lines(events), "\n".join(lines) or None, (numbers or [None])[-1]),
            )
            n += size
        tx.execute("UPDATE runs SET last_seq = ? WHERE id = ?", (n, run_id))


def test_a_store_whose_batches_were_keyed_by_run_id_is_migrated_and_its_runs_go_on(tmp_path: Path) -> None:
    # Migration 7 moves every batch to a key the table's rowid holds (run number << 32 | last number).
    from loopwarden.trace.exchanges import exchange_rows
    from loopwarden.trace.rows import exchange_line, last_exchange

    path = tmp_path / "runs.db"
    old = RunStore(path, migrations=MIGRATIONS[:6])  # as the previous version made stores
    runs = [old.create_run(status="running") for _ in range(3)]
    for run in runs[:2]:  # the third has no batch yet
        _old_batches(old, run.id)
    old.close()
    new = RunStore(path)
    assert new.schema_version() == len(MIGRATIONS) == 7
    conn = new._connection()
    assert conn.execute("SELECT COUNT(*) FROM event_batches").fetchone()[0] == 2 * len(SIZES)
    assert "run_id" not in {row[1] for row in conn.execute("PRAGMA table_info(event_batches)")}
    for run in runs[:2]:
        everything = new.event_rows(run.id)
        assert [(e.seq, json.loads(e.data)["n"], e.run_id) for e in everything] == [
            (i + 1, i, run.id) for i in range(11)
        ]
        for after in range(13):
            for limit in (None, 1, 2, 4, 20):
                assert new.event_rows(run.id, after, limit=limit) == everything[after:][:limit], (after, limit)
        replies = [(row["n"], row["reply"]) for row in exchange_rows(new, run.id)]
        assert replies == [(x, f'"reply {x}"') for x in range(1, 5)]
        with new._write() as tx:
            assert last_exchange(tx, run.id) == 4

    def fifth(tx: Any) -> tuple[int, str]:
        return 5, exchange_line(5, 4, 0, '"m"', 2.5, None, '{"messages":[]}', '"reply 5"', None)

    # Each run goes on after its migrated batches: the next numbers, the next exchange.
    assert new.append_events(runs[0].id, [_event(runs[0].id, 11)], exchanges=[fifth]) == [12]
    assert new.append_events(runs[2].id, [_event(runs[2].id, 0)]) == [1]  # numbered at its first batch
    assert [json.loads(e.data)["n"] for e in new.event_rows(runs[0].id, 10)] == [10, 11]
    assert [row["n"] for row in exchange_rows(new, runs[0].id)] == [1, 2, 3, 4, 5]
    assert [row["n"] for row in exchange_rows(new, runs[1].id)] == [1, 2, 3, 4]
    assert [e.seq for e in new.event_rows(runs[2].id)] == [1] and new.event_rows(runs[1].id, 11) == []
    numbers = dict(conn.execute("SELECT run_id, number FROM run_numbers").fetchall())
    assert sorted(numbers) == sorted(run.id for run in runs) and len(set(numbers.values())) == 3


def test_a_deleted_runs_batches_go_with_it_and_its_number_given_again_finds_none(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    first, last = store.create_run(), store.create_run()
    store.append_events(first.id, [_event(first.id, 0), _event(first.id, 1)])
    store.append_events(last.id, [_event(last.id, 7)])
    with store._write() as tx:  # the last number given: a new run may be given it again
        tx.execute("DELETE FROM runs WHERE id = ?", (last.id,))
    conn = store._connection()
    assert conn.execute("SELECT COUNT(*) FROM event_batches").fetchone()[0] == 1
    again = store.create_run()
    assert store.append_events(again.id, [_event(again.id, 3)]) == [1]
    assert [json.loads(e.data)["n"] for e in store.event_rows(again.id)] == [3]
    assert [json.loads(e.data)["n"] for e in store.event_rows(first.id)] == [0, 1]


def test_a_run_is_refused_events_past_what_its_batch_key_holds(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    run = store.create_run()
    with store._write() as tx:
        tx.execute("UPDATE runs SET last_seq = ? WHERE id = ?", (2**32 - 2, run.id))
    assert store.append_events(run.id, [_event(run.id, 0)]) == [2**32 - 1]
    with pytest.raises(ValueError, match="more events"):
        store.append_events(run.id, [_event(run.id, 1)])
    assert store.last_seq(run.id) == 2**32 - 1  # nothing of it written
    assert [e.seq for e in store.event_rows(run.id)] == [2**32 - 1]
