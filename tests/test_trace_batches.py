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
