"""The run store on a real Postgres (trace/pgstore.py): the SQLite store's behaviour, shared by
processes: gap-free numbering under concurrent writers, approvals decided once, timestamps kept
to the microsecond, migrations applied once by whoever starts first."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from durable_kit import fresh_database
from loopwarden.server.events import RunQueued

pytest.importorskip("psycopg", reason="the durable extra is not installed")

from loopwarden.trace.pgstore import PostgresRunStore


def test_concurrent_writers_number_events_without_gaps_or_duplicates() -> None:
    with fresh_database() as url:
        stores = [PostgresRunStore(url) for _ in range(3)]  # three "processes" on one database
        run = stores[0].create_run(params={"source": "x"})

        def write(i: int) -> int:
            event = RunQueued(run_id=run.id, seq=1, ts=time.time(), params={"i": i})
            return stores[i % 3].append_event(run.id, event)

        with ThreadPoolExecutor(6) as pool:
            seqs = sorted(pool.map(write, range(60)))
        assert seqs == list(range(1, 61))
        events = stores[1].events(run.id)
        assert [e.seq for e in events] == seqs
        assert sorted(e.model_dump()["params"]["i"] for e in events) == list(range(60))
        assert stores[2].get_run(run.id).last_seq == 60
        for store in stores:
            store.close()


def test_rows_read_back_like_the_sqlite_store() -> None:
    with fresh_database() as url:
        store = PostgresRunStore(url)
        assert PostgresRunStore(url).schema_version() == store.schema_version() >= 2  # migrated once
        now = time.time()
        run = store.create_run(params={"a": [1, 2]}, data_dir="/d", out_dir="/o")
        assert abs(store.get_run(run.id).created_at - now) < 1.0  # DOUBLE PRECISION, not 4-byte REAL
        store.add_approval(run.id, "c1", "write", {"x": 1}, "needs a person")
        assert store.decide_approval(run.id, "c1", approve=True, by="ann") is not None
        assert store.decide_approval(run.id, "c1", approve=False) is None  # the first decision stands
        assert store.approval(run.id, "c1").status == "approved"  # type: ignore[union-attr]
        store.set_status(run.id, "running")
        assert store.count_runs(statuses=frozenset({"running"})) == 1
        assert store.mark_interrupted_on_start() == [run.id]
        assert [e.type for e in store.events(run.id)] == ["run_interrupted"]
        assert store.list_runs(status="interrupted")[0].params == {"a": [1, 2]}
        store.close()


async def test_a_traced_agent_run_on_postgres_is_committed_before_each_event_is_streamed() -> None:
    from contextlib import aclosing

    from loopwarden import Agent
    from loopwarden.events import RunFinished
    from loopwarden.models.scripted import ScriptedModel, call
    from loopwarden.trace.exchanges import load_exchanges
    from trace_fixtures import read_file

    with fresh_database() as url:
        store, reader = PostgresRunStore(url), PostgresRunStore(url)  # the reader: another process's view
        model = ScriptedModel([call("read_file", {"path": "a.txt"}), call("read_file", {"path": "b.txt"}), "done."])
        seen = []
        async with aclosing(Agent(model, [read_file], trace=store).stream("Read", run_id="pg-run")) as events:
            async for event in events:
                seen.append(event)
                row = reader.get_run("pg-run")
                assert row.last_seq >= event.seq  # committed before it was streamed
                if isinstance(event, RunFinished):
                    assert row.status == event.status == "completed"  # and so is how it ended
        assert [e.model_dump() for e in reader.events("pg-run")] == [e.model_dump() for e in seen]
        assert [x.request for x in load_exchanges(reader, "pg-run")] == model.requests
        assert reader.get_run("pg-run").params["tools"] == ["read_file"]
        store.close()
        reader.close()


def test_text_with_a_nul_is_kept_on_postgres_as_a_replacement_character() -> None:
    """Postgres text cannot hold U+0000 (SQLite's can): a model's answer, an approval's reason or
    a tool's name with one must not fail the write that closes the run (the run would be lost as
    `running`); each NUL is stored as U+FFFD. JSON columns escape it and keep it as it was."""
    from loopwarden import Agent
    from loopwarden.models.scripted import ScriptedModel

    with fresh_database() as url:
        store = PostgresRunStore(url)
        result = Agent(ScriptedModel(["done\x00 here"]), [], trace=store).run_sync("Say it", run_id="nul-run")
        assert result.output == "done\x00 here"
        row = store.get_run("nul-run")
        assert row.status == "completed"
        assert row.message == "done\ufffd here"
        finished = store.events("nul-run")[-1]
        assert finished.model_dump()["output"] == "done\x00 here"  # the event's JSON keeps it
        store.add_approval("nul-run", "c\x001", "wr\x00ite", {"x": "\x00"}, "needs\x00 a person")
        approval = store.approval("nul-run", "c\ufffd1")
        assert approval is not None
        assert (approval.tool, approval.reason) == ("wr\ufffdite", "needs\ufffd a person")
        assert approval.arguments == {"x": "\x00"}
        store.close()


def test_a_final_status_is_announced_like_a_commit_of_events() -> None:
    """A run's final status is set after its terminal event, so the terminal event's NOTIFY can
    wake an API process's stream before the row is final: the final status is announced too
    (and only it: a run paused or resumed wakes nobody), so the stream ends without polling."""
    import psycopg

    from loopwarden.trace.pgstore import EVENTS_CHANNEL

    with fresh_database() as url, psycopg.connect(url, autocommit=True) as listener:
        store = PostgresRunStore(url)
        run = store.create_run()
        listener.execute(f"LISTEN {EVENTS_CHANNEL}")
        store.set_status(run.id, "running")
        store.set_status(run.id, "paused")
        store.set_status(run.id, "completed")
        listener.execute(f"NOTIFY {EVENTS_CHANNEL}, 'marker'")  # delivered after all the above
        payloads = []
        for note in listener.notifies(timeout=60):
            payloads.append(note.payload)
            if note.payload == "marker":
                break
        assert payloads == [run.id, "marker"]
        store.close()
