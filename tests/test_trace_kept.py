"""A traced `Agent.run` keeps its step events as their dicts too (hotpath/kept.py): the recorder
commits them from the dicts (trace/lines.py), byte for byte the JSON of the events they build,
before each wait as the run streamed (in larger batches where it never waits: nobody reads them
before the run's end), and with every event told when it fails."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable_kit import fresh_database
from loopwarden import Agent, Budgets, FunctionModel, LoopConfig, ModelReply, Usage, tool
from loopwarden.events import Event, GuardVerdict, ModelCalled, ToolCallFinished, ToolCallProposed, UnknownEvent
from loopwarden.hotpath.kept import KeptEvents, count_of
from loopwarden.models.scripted import call
from loopwarden.trace import recorder, rows
from loopwarden.trace.exchanges import exchange_rows
from loopwarden.trace.store import RunStore
from loopwarden.trace.writer import MAX_BATCH
from test_kept_events import _deterministic, _same

ODD = 'é ü 中文 🙂 "quoted" \\ back\tslash \u2028 \u2029 \x00 \x1f \x7f line\nbreak'


@tool(blocking=False)
def read(path: str) -> str:
    """Read a file."""
    return f"text of {path}: {ODD}"


def _odd_script() -> Any:
    """Allowed, refused (unknown tool, bad JSON), answered from the cache, two calls in one turn, a
    nudged repeat; odd text in replies, arguments and results; usage and a model name."""
    replies: list[Any] = [
        ModelReply(text=ODD, tool_calls=[call("read", {"path": ODD})], usage=Usage(prompt_tokens=7, cached_tokens=2)),
        call("nope"),
        call("read", "{not json"),
        ModelReply(text="again", tool_calls=[call("read", {"path": ODD})], model="odd/model-é"),
        [call("read", {"path": "b"}), call("read", {"path": "c"})],
        call("read", {"path": ODD}),
        call("read", {"path": ODD}),
        f"done: {ODD}".replace("\x00", ""),  # a run row's message on Postgres holds no NUL (its text type)
    ]
    script = iter(replies)
    return lambda request: next(script, "done")


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunStore, RunStore]]:
    """Two stores: one for a run kept, one for the same run streamed."""
    if request.param == "sqlite":
        pair = RunStore(tmp_path / "kept.db"), RunStore(tmp_path / "streamed.db")
        yield pair
        for store in pair:
            store.close()
        return
    pytest.importorskip("psycopg", reason="the durable extra is not installed")
    from loopwarden.trace.pgstore import PostgresRunStore

    with fresh_database() as first, fresh_database() as second:
        pair = PostgresRunStore(first), PostgresRunStore(second)
        yield pair  # type: ignore[misc]
        for store in pair:
            store.close()


async def _streamed(agent: Agent[Any, Any], prompt: str, run_id: str) -> list[Event]:
    return [event async for event in agent.stream(prompt, run_id=run_id)]


def _lines(store: RunStore, run_id: str) -> list[tuple[int, str, float, str]]:
    return [(row.seq, row.type, row.ts, row.data) for row in store.event_rows(run_id)]


@pytest.mark.parametrize("rounds", [None, 3])
def test_a_traced_run_keeps_its_step_events_and_stores_the_json_they_build(
    monkeypatch: pytest.MonkeyPatch, stores: tuple[RunStore, RunStore], rounds: int | None
) -> None:
    """Every kind of step, ended by the answer or by a budget, odd text everywhere: the stored
    lines are the built events' `to_json()`, and the same as the run streamed stores."""
    kept_store, streamed_store = stores
    config = LoopConfig() if rounds is None else LoopConfig(budgets=Budgets(max_tool_rounds=rounds))
    _deterministic(monkeypatch)
    result = Agent(FunctionModel(_odd_script()), [read], config=config, trace=kept_store).run_sync("x", run_id="r")
    assert type(result.__dict__["_events"]) is KeptEvents  # kept: nothing built while it ran
    kept = result.events
    stored = _lines(kept_store, "r")
    assert stored == [(e.seq, e.type, e.ts, e.to_json()) for e in kept]
    assert {ModelCalled, ToolCallProposed, GuardVerdict, ToolCallFinished} <= {type(e) for e in kept}
    assert ODD in next(e for e in kept if isinstance(e, ModelCalled)).text  # type: ignore[operator]

    _deterministic(monkeypatch)
    agent = Agent(FunctionModel(_odd_script()), [read], config=config, trace=streamed_store)
    streamed = asyncio.run(_streamed(agent, "x", "r"))
    _same(kept, streamed)
    assert _lines(streamed_store, "r") == stored
    assert exchange_rows(kept_store, "r") == exchange_rows(streamed_store, "r")
    assert kept_store.get_run("r").status == streamed_store.get_run("r").status == result.status


@tool
def read_lines(offset: int) -> str:
    """Read lines of the log."""
    return "\n".join(f"sample {i}: flow {i * 0.37:.2f} L/min at {20 + i % 7} C" for i in range(offset, offset + 20))


def _reader(rounds: int, *, waits: bool) -> FunctionModel:
    """Reads a log block by block (the bench's healthy run), then answers."""
    answered = 0

    def reply(request: Any) -> ModelReply | str:
        nonlocal answered
        answered += 1
        if answered > rounds:
            return "done"
        return ModelReply(text=f"Reading block {answered}.", tool_calls=[call("read_lines", {"offset": 20 * answered})])

    async def waiting(request: Any) -> ModelReply | str:
        await asyncio.sleep(0)
        return reply(request)

    return FunctionModel(waiting if waits else reply)


@pytest.mark.parametrize(("waits", "kept_batch"), [(False, None), (False, 100), (True, None)])
def test_a_kept_run_commits_at_each_wait_and_in_larger_batches_than_a_streamed_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, waits: bool, kept_batch: int | None
) -> None:
    """What is committed when: a run that waits on each call commits before each wait, kept or
    streamed alike; one that never waits commits a full batch (the last event of it built by the
    stamper, so the recorder sees it) and the rest at its end, a streamed run `MAX_BATCH` events
    at a time and a kept one (nobody reads its events before its end) `KEPT_BATCH` kept items (a
    call's three events are one): here all at once, or 100 items and the rest with the limit
    lowered. Either way the store holds the same rows' contents: every event line and every
    exchange, byte for byte."""
    import loopwarden.tools

    monkeypatch.setattr(loopwarden.tools, "INLINE_LIMIT_S", 60.0)  # the quick tool never goes to a thread
    if kept_batch is not None:
        monkeypatch.setattr(recorder, "KEPT_BATCH", kept_batch)
    config = LoopConfig(budgets=Budgets(max_tool_rounds=100, max_model_calls=100))
    sizes: list[list[int]] = []  # events a commit
    items: list[list[int]] = []  # what the recorder was given a commit (a kept call's three events are one)
    append = RunStore.append_events

    def counting(self: RunStore, run_id: str, events: Any, **kwargs: Any) -> Any:
        done = append(self, run_id, events, **kwargs)
        if done is not None:
            sizes[-1].append(count_of(events))
            items[-1].append(len(events))
            assert done == list(range(done[0], done[0] + count_of(events)))
        return done

    monkeypatch.setattr(RunStore, "append_events", counting)
    Agent(_reader(5, waits=waits), [read_lines]).run_sync("x")  # the tool known quick: run inline from then on
    stores = {}
    for kept in (True, False):
        sizes.append([])
        items.append([])
        _deterministic(monkeypatch)
        stores[kept] = RunStore(tmp_path / f"{kept}.db")
        agent = Agent(_reader(90, waits=waits), [read_lines], config=config, trace=stores[kept])
        if kept:
            assert agent.run_sync("x", run_id="r").status == "completed"
        else:
            assert asyncio.run(_streamed(agent, "x", "r"))[-1].status == "completed"  # type: ignore[attr-defined]
    told = sum(sizes[1])
    assert sum(sizes[0]) == told > MAX_BATCH
    if waits:
        assert sizes[0] == sizes[1] and len(sizes[0]) > 90
    else:
        assert sizes[1] == items[1] == [MAX_BATCH, told - MAX_BATCH]
        assert len(items[0]) == (1 if kept_batch is None else 2)  # a run of 90 steps that never waits commits once
        assert kept_batch is None or items[0][0] == kept_batch
        assert sizes[0][0] > items[0][0]  # the calls' events kept three to an item
    # The same rows' contents but for the times: a commit reads the clock (the run row's
    # `updated_at`), so commits at other points move the fake clock's later readings.
    assert _untimed(stores[True]) == _untimed(stores[False])
    for store in stores.values():
        store.close()


def test_a_kept_call_retried_in_its_turn_is_stored_in_order(
    monkeypatch: pytest.MonkeyPatch, stores: tuple[RunStore, RunStore]
) -> None:
    """A quick tool that fails for a moment is retried in the loop's common turn: the run waits on
    the retry, and the recorder commits what the run kept so far meanwhile (the call's proposed
    and verdict events among them, kept one by one before the wait, step_events.keep_pair). The
    stored lines are the built events' in order, and committed at the same points, as the same
    run streamed stores them."""
    from loopwarden import RetryPolicy

    sizes: list[list[int]] = []  # events a commit, the kept run's then the streamed run's
    cls = type(stores[0])  # Postgres' store is another class
    append = cls.append_events

    def counting(self: Any, run_id: str, events: Any, **kwargs: Any) -> Any:
        done = append(self, run_id, events, **kwargs)
        if done is not None and events:
            sizes[-1].append(count_of(events))
        return done

    monkeypatch.setattr(cls, "append_events", counting)

    failures: list[str] = []

    @tool(blocking=False)
    def flaky(path: str) -> str:
        """Read a file over a link that drops now and then."""
        if path not in failures:
            failures.append(path)
            raise ConnectionError(f"link down reading {path}")
        return f"text of {path}"

    def script() -> Any:
        replies = iter([call("flaky", {"path": "a"}), call("flaky", {"path": "b"}), "done"])
        return lambda request: next(replies, "done")

    config = LoopConfig(retry=RetryPolicy(base_delay=0.001, jitter="none"))
    kept_store, streamed_store = stores
    _deterministic(monkeypatch)
    sizes.append([])
    result = Agent(FunctionModel(script()), [flaky], config=config, trace=kept_store).run_sync("x", run_id="r")
    kept = result.events
    finished = [e for e in kept if isinstance(e, ToolCallFinished)]
    assert [(e.ok, e.attempts) for e in finished] == [(True, 2), (True, 2)]
    assert [e.seq for e in kept] == list(range(1, len(kept) + 1))
    assert _lines(kept_store, "r") == [(e.seq, e.type, e.ts, e.to_json()) for e in kept]

    failures.clear()
    _deterministic(monkeypatch)
    agent = Agent(FunctionModel(script()), [flaky], config=config, trace=streamed_store)
    sizes.append([])
    _same(kept, asyncio.run(_streamed(agent, "x", "r")))
    assert _untimed(kept_store) == _untimed(streamed_store)
    assert sizes[0] == sizes[1] and len(sizes[0]) > 2  # a commit before each retry's wait, kept or streamed


def _untimed(store: RunStore) -> tuple[list[Any], list[Any]]:
    """A run's stored events and exchanges without their times and durations (read from the clock)."""
    events = []
    for seq, kind, _, data in _lines(store, "r"):
        values = json.loads(data)
        values.pop("ts"), values.pop("duration_ms", None), values.get("totals", {}).pop("duration_s", None)
        events.append((seq, kind, values))
    exchanges = [{key: value for key, value in row.items() if key != "ts"} for row in exchange_rows(store, "r")]
    return events, exchanges


def _failing(after: int) -> FunctionModel:
    calls = 0

    def reply(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > after:
            raise RuntimeError("the model fell over")
        return call("read", {"path": f"p{calls}"})

    return FunctionModel(reply)


def test_a_failing_traced_run_keeps_every_event_it_told(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _deterministic(monkeypatch)
    with pytest.raises(RuntimeError):
        Agent(_failing(3), [read], trace=tmp_path / "kept.db").run_sync("x", run_id="f")
    _deterministic(monkeypatch)
    with pytest.raises(RuntimeError):
        asyncio.run(_streamed(Agent(_failing(3), [read], trace=tmp_path / "streamed.db"), "x", "f"))
    kept, streamed = RunStore(tmp_path / "kept.db"), RunStore(tmp_path / "streamed.db")
    stored = _lines(kept, "f")
    assert stored == _lines(streamed, "f")
    assert [seq for seq, *_ in stored] == list(range(1, len(stored) + 1))
    assert [kind for _, kind, *_ in stored].count("tool_call_finished") == 3
    assert kept.get_run("f").status == "failed"


def test_a_cancelled_traced_run_keeps_every_event_it_told(tmp_path: Path) -> None:
    calls = 0

    async def reply(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > 2:
            await asyncio.Event().wait()  # never answers
        return call("read", {"path": f"p{calls}"})

    async def cancelled() -> None:
        task = asyncio.create_task(Agent(FunctionModel(reply), [read], trace=tmp_path / "c.db").run("x", run_id="c"))
        while calls < 3:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    store = RunStore(tmp_path / "c.db")
    kinds = [row.type for row in store.event_rows("c")]
    assert kinds.count("model_called") == 2 and kinds.count("tool_call_finished") == 2
    assert [row.seq for row in store.event_rows("c")] == list(range(1, len(kinds) + 1))
    assert store.get_run("c").status == "cancelled"


def _note(run_id: str, n: int) -> Event:
    return UnknownEvent(type="note", run_id=run_id, seq=0, ts=1_764_676_543.25 + n, n=n, text="x" * 300)


def _exchange(n: int) -> tuple[int, str]:
    reply = '{"text":"' + "y" * 900 + '"}'
    return n, rows.exchange_line(n, 0, 0, '"m"', 1_764_676_543.5, None, '{"messages":[]}', reply, None)


def test_a_commit_past_row_bytes_goes_in_rows_that_read_back_as_one(tmp_path: Path) -> None:
    """SQLite: a commit of more than `ROW_BYTES` is split evenly into rows, in order; its events
    and exchanges read back whole, after any event, and the next exchange is numbered after them."""
    store = RunStore(tmp_path / "runs.db")
    run = store.create_run()
    store.append_events(run.id, [_note(run.id, 0)])
    events = [_note(run.id, n) for n in range(1, 301)]
    exchanges = [lambda tx, n=n: _exchange(n) for n in range(1, 61)]
    assert store.append_events(run.id, events, exchanges=exchanges) == list(range(2, 302))
    batches = store._connection().execute("SELECT first_seq, data, exchanges FROM event_batches ORDER BY batch")
    split = batches.fetchall()[1:]  # after the first commit's row
    size = sum(len(data) + len(exchanges) for _, data, exchanges in split)
    assert len(split) == size // rows.ROW_BYTES + 1 > 1
    assert [first for first, *_ in split] == sorted(first for first, *_ in split)
    assert all(exchanges is not None for *_, exchanges in split)  # spread evenly over the rows
    assert [row["n"] for row in exchange_rows(store, run.id)] == list(range(1, 61))
    everything = store.event_rows(run.id)
    assert [row.seq for row in everything] == list(range(1, 302))
    expected = [e.model_copy(update={"seq": n}).to_json() for n, e in enumerate(events, 2)]
    assert [row.data for row in everything[1:]] == expected
    for after in (0, 1, 2, 150, 299, 301):
        assert store.event_rows(run.id, after) == everything[after:]
        for limit in (1, 7):
            assert store.event_rows(run.id, after, limit=limit) == everything[after:][:limit]
    with store._write() as tx:
        assert rows.last_exchange(tx, run.id) == 60
