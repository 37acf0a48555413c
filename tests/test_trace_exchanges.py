"""Model exchanges stored with their tools once (migration 5: a request that offers the tools of
an earlier row of its run is stored without them, `tools_from` naming that row) read back whole,
on SQLite and Postgres, and so do the rows of stores written before, where every request held its
own tools."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import to_json

from durable_kit import fresh_database
from loopwarden import Agent
from loopwarden.config import LoopConfig
from loopwarden.models.base import ModelReply, ModelRequest
from loopwarden.models.cassette import ReplayModel
from loopwarden.models.scripted import ScriptedModel, call
from loopwarden.trace.exchanges import TracedModel, cassette_for_run, exchange_rows, load_exchanges
from loopwarden.trace.migrations import MIGRATIONS
from loopwarden.trace.store import RunStore
from loopwarden.trace.writer import RunWriter
from trace_fixtures import read_file


def _tool(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return {"type": "function", "function": {"name": name, "description": f"{name} a file", "parameters": parameters}}


def _request(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelRequest:
    # As the runtime builds them: the same tool dicts offered call after call (not copies).
    return ModelRequest.model_construct(messages=list(messages), tools=tools, tool_choice="auto", max_tokens=None)


def _open(kind: str, tmp_path: Path, migrations: Any = MIGRATIONS, url: str = "") -> RunStore:
    if kind == "sqlite":
        return RunStore(tmp_path / "runs.db", migrations=migrations)
    from loopwarden.trace.pgstore import PostgresRunStore

    return PostgresRunStore(url, migrations=migrations)


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Opens the same store (each call a new handle), with the migrations given."""
    if request.param == "sqlite":
        yield lambda migrations=MIGRATIONS: _open("sqlite", tmp_path, migrations)
        return
    pytest.importorskip("psycopg", reason="the durable extra is not installed")
    with fresh_database() as url:
        yield lambda migrations=MIGRATIONS: _open("postgres", tmp_path, migrations, url)


def _rows(store: RunStore, run_id: str) -> list[tuple[str, int | None]]:
    return [(row["request"], row["tools_from"]) for row in exchange_rows(store, run_id)]


async def test_a_traced_run_stores_its_tools_once_and_reads_every_request_back_whole(opener: Any) -> None:
    store = opener()
    model = ScriptedModel([call("read_file", {"path": "a.txt"}), call("read_file", {"path": "b.txt"}), "alpha, beta."])
    await Agent(model, [read_file], trace=store).run("Read a and b", run_id="r1")
    exchanges = load_exchanges(opener(), "r1")
    assert [x.request for x in exchanges] == model.requests
    assert [x.request.model_dump_json() for x in exchanges] == [r.model_dump_json() for r in model.requests]
    assert [x.request for x in cassette_for_run(opener(), "r1").interactions] == model.requests
    rows = _rows(store, "r1")
    assert [tools_from for _, tools_from in rows] == [None, 1, 1]
    assert ['"tools"' in request for request, _ in rows] == [True, False, False]


async def test_tools_that_change_are_written_again_and_rows_point_at_the_latest(opener: Any) -> None:
    store = opener()
    store.create_run(run_id="r", kind="agent", status="running")
    writer = RunWriter(store, "r")
    writer.opened = True  # the run's row is there: the exchanges wait for the writer's commit
    read, write = [_tool("read")], [_tool("write"), _tool("read")]
    offers = [read, read, write, read, read, []]
    model = TracedModel(ScriptedModel([f"answer {i}" for i in range(len(offers))]), store, "r", writer)
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    sent = []
    for i, tools in enumerate(offers):
        sent.append(_request(history, tools))
        reply = await model.complete(sent[-1])
        history += [reply.assistant_message(), {"role": "user", "content": f"and then {i}"}]
        if i == 2:  # rows that point across commits
            await writer.flush()
    await writer.flush()
    exchanges = load_exchanges(opener(), "r")
    assert [x.request.model_dump_json() for x in exchanges] == [r.model_dump_json() for r in sent]
    assert [x.request.tools for x in exchanges] == offers
    assert [tools_from for _, tools_from in _rows(store, "r")] == [None, 1, None, None, 4, None]


async def test_a_row_written_before_the_runs_row_holds_the_tools_the_next_rows_point_at(opener: Any) -> None:
    store = opener()
    # Not opened: the first call comes before the run's first event, and its row makes the run's
    # (on Postgres the earlier code failed here: SQLite's INSERT OR IGNORE is a syntax error there).
    writer = RunWriter(store, "early")
    tools = [_tool("read")]
    model = TracedModel(ScriptedModel(["one", "two", "three"]), store, "early", writer)
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    sent = []
    for i in range(3):
        if i == 1:
            writer.opened = True  # the run's row is on its way: rows wait for the events' commit
        sent.append(_request(history, tools))
        reply = await model.complete(sent[-1])
        history += [reply.assistant_message(), {"role": "user", "content": "next"}]
    await writer.flush()
    exchanges = load_exchanges(opener(), "early")
    assert [x.request.model_dump_json() for x in exchanges] == [r.model_dump_json() for r in sent]
    assert [tools_from for _, tools_from in _rows(store, "early")] == [None, 1, 1]
    # Alone (no writer: each exchange committed as it comes), every row holds its own tools.
    alone = TracedModel(ScriptedModel(["a", "b"]), store, "alone")
    requests = [_request([{"role": "user", "content": "q"}], tools) for _ in range(2)]
    for request in requests:
        await alone.complete(request)
    assert [x.request for x in load_exchanges(opener(), "alone")] == requests
    assert [tools_from for _, tools_from in _rows(store, "alone")] == [None, None]


async def test_a_message_list_handed_in_again_changed_is_stored_as_it_was_sent(opener: Any) -> None:
    """The model keeps the previous request's list to find what the next one added: a caller that
    hands the same list in again, appended to in place, has each request stored as it was sent
    (the second whole, not as nothing added), and a new list after it is a delta again."""
    store = opener()
    store.create_run(run_id="same", kind="agent", status="running")
    writer = RunWriter(store, "same")
    writer.opened = True  # the run's row is there: the exchanges wait for the writer's commit
    model = TracedModel(ScriptedModel(["one", "two", "three"]), store, "same", writer)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    sent = []
    for step in range(3):
        request = ModelRequest.model_construct(messages=messages, tools=[], tool_choice="auto", max_tokens=None)
        await model.complete(request)
        sent.append(request.model_dump_json())  # as it was when sent
        if step == 0:
            messages.append({"role": "user", "content": "more"})  # the same list, changed in place
        else:
            messages = [*messages, {"role": "user", "content": "and more"}]  # a new list
    await writer.flush()
    assert [x.request.model_dump_json() for x in load_exchanges(opener(), "same")] == sent
    prefixes = [row["prefix"] for row in exchange_rows(store, "same")]
    assert prefixes == [0, 0, 2]  # the list handed in again stored whole; the new one a delta


def _old_request_json(added: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """A request as TracedModel wrote it before migration 5: the messages added, tool_choice, tools."""
    head = to_json({"messages": added, "tool_choice": "auto"}).decode()
    return f'{head[:-1]}, "tools": {json.dumps(tools, ensure_ascii=False)}}}'


async def _go_on(
    store: RunStore, history: list[Any], tools: list[Any], sent: list[ModelRequest], replies: list[str]
) -> None:
    """Run "r" goes on with this version's writer: a call for each of `replies`, committed at once."""
    writer = RunWriter(store, "r")
    writer.opened = True
    model = TracedModel(ScriptedModel(list(replies)), store, "r", writer)
    for text in replies:
        sent.append(_request(history, tools))
        await model.complete(sent[-1])
        history += [{"role": "assistant", "content": text}, {"role": "user", "content": "next"}]
    await writer.flush()


async def test_a_store_written_before_reads_back_whole_and_its_runs_go_on_in_the_new_rows(opener: Any) -> None:
    old = opener(MIGRATIONS[:4])  # as stores in the field were made
    old.create_run(run_id="r", kind="agent", status="running")
    tools = [_tool("read")]
    history: list[dict[str, Any]] = [{"role": "user", "content": "go é"}]
    sent, prefix = [], 0
    with old._write() as tx:  # rows as an earlier version wrote them: every request with its tools
        for n in (1, 2, 3):
            sent.append(_request(history, tools))
            reply = ModelReply(text=f"answer {n}")
            tx.execute(
                "INSERT INTO model_exchanges (run_id, n, base, prefix, model, request, reply, error, ts)"
                " VALUES ('r', ?, ?, ?, 'm', ?, ?, NULL, 0)",
                (n, n - 1, prefix, _old_request_json(history[prefix:], tools), reply.model_dump_json()),
            )
            prefix = len(history)
            history += [reply.assistant_message(), {"role": "user", "content": f"more {n}"}]
    old.close()

    new = opener()
    assert new.schema_version() == len(MIGRATIONS)
    assert [x.request.model_dump_json() for x in load_exchanges(new, "r")] == [r.model_dump_json() for r in sent]
    assert [x.reply.text for x in cassette_for_run(new, "r").interactions if x.reply] == [
        "answer 1",
        "answer 2",
        "answer 3",
    ]
    # The same run goes on with this version: its next rows hold the tools once, after the old rows.
    await _go_on(new, history, tools, sent, ["four", "five"])
    exchanges = load_exchanges(opener(), "r")
    assert [x.request.model_dump_json() for x in exchanges] == [r.model_dump_json() for r in sent]
    assert [tools_from for _, tools_from in _rows(new, "r")] == [None, None, None, None, 4]


async def test_a_capped_call_is_stored_with_its_max_tokens_and_replays_as_capped(opener: Any) -> None:
    store = opener()
    script = [call("read_file", {"path": "a.txt"}), "alpha."]
    model = ScriptedModel(script)
    await Agent(model, [read_file], config=LoopConfig(max_output_tokens=16), trace=store).run("Read a", run_id="r")
    assert [r.max_tokens for r in model.requests] == [16, 16]
    exchanges = load_exchanges(opener(), "r")
    assert [x.request.max_tokens for x in exchanges] == [16, 16]
    assert [x.request.model_dump_json() for x in exchanges] == [r.model_dump_json() for r in model.requests]
    # Alone (each exchange committed as it comes, the row's own INSERT): kept as well; an
    # uncapped call is stored without the key and reads back None.
    alone = TracedModel(ScriptedModel(["a", "b"]), store, "alone")
    capped = ModelRequest(messages=[{"role": "user", "content": "q"}], max_tokens=8)
    await alone.complete(capped)
    await alone.complete(ModelRequest(messages=[{"role": "user", "content": "q"}]))
    assert [x.request.max_tokens for x in load_exchanges(opener(), "alone")] == [8, None]
    assert ['"max_tokens"' in request for request, _ in _rows(store, "alone")] == [True, False]
    # Replayed, the run asks the same capped requests and matches every recorded one.
    replay = ReplayModel(cassette_for_run(opener(), "r"))
    again = await Agent(replay, [read_file], config=LoopConfig(max_output_tokens=16)).run("Read a")
    assert again.output == "alpha."
    assert replay.divergences == []
    assert [r.max_tokens for r in replay.requests] == [x.request.max_tokens for x in exchanges]


async def test_rows_written_before_max_tokens_was_kept_replay_against_capped_requests(opener: Any) -> None:
    old = opener(MIGRATIONS[:4])
    old.create_run(run_id="r", kind="agent", status="running")
    tools = [_tool("read_file")]  # matching compares the tools' names
    replies = [ModelReply(tool_calls=[call("read_file", {"path": "a.txt"})]), ModelReply(text="alpha.")]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read a"}]
    with old._write() as tx:  # as TracedModel wrote them before: no max_tokens, capped or not
        tx.execute(
            "INSERT INTO model_exchanges (run_id, n, base, prefix, model, request, reply, error, ts)"
            " VALUES ('r', 1, 0, 0, 'm', ?, ?, NULL, 0)",
            (_old_request_json(history, tools), replies[0].model_dump_json()),
        )
        tx.execute(  # the second request's history: the recorded reply and a tool result after it
            "INSERT INTO model_exchanges (run_id, n, base, prefix, model, request, reply, error, ts)"
            " VALUES ('r', 2, 1, 1, 'm', ?, ?, NULL, 0)",
            (
                _old_request_json([replies[0].assistant_message(), {"role": "tool", "content": "alpha"}], tools),
                replies[1].model_dump_json(),
            ),
        )
    old.close()
    cassette = cassette_for_run(opener(), "r")
    assert [x.request.max_tokens for x in cassette.interactions] == [None, None]
    replay = ReplayModel(cassette)
    result = await Agent(replay, [read_file], config=LoopConfig(max_output_tokens=16)).run("Read a")
    assert result.output == "alpha."
    assert [r.max_tokens for r in replay.requests] == [16, 16]
    assert replay.divergences == []  # matched by tools and roles, as before: the cap is no part of it


async def test_a_runs_exchanges_go_in_one_row_a_commit_and_read_back_byte_for_byte(opener: Any) -> None:
    # Migration 6: a commit's exchanges ride in its events' row, one a line, fields apart by U+001F. A model
    # name and message text holding that character or a line break must not split a line.
    store = opener()
    odd = "odd\x1f\nname"
    model = ScriptedModel([call("read_file", {"path": "a.txt"}), "tab\x1fand\nline"], name=odd)
    await Agent(model, [read_file], trace=store).run("Read \x1f a\n", run_id="r")
    batches = store._connection().execute(  # the store's only run (SQLite keys batches by number, migration 7)
        "SELECT last_n FROM event_batches WHERE exchanges IS NOT NULL ORDER BY last_n"
    )  # its exchanges are in the rows of the events they came with (one commit, or two if the
    # tool ran in a worker thread, as a slow one does)
    assert [row[0] for row in batches.fetchall()] in ([2], [1, 2])
    assert store._connection().execute("SELECT COUNT(*) FROM model_exchanges").fetchone()[0] == 0
    cassette = cassette_for_run(opener(), "r")
    assert cassette.model == odd
    assert [x.request.model_dump_json() for x in cassette.interactions] == [r.model_dump_json() for r in model.requests]
    assert [x.reply.text if x.reply else None for x in cassette.interactions] == [None, "tab\x1fand\nline"]
    rows = exchange_rows(opener(), "r")
    assert [row["reply"] for row in rows] == [x.reply.model_dump_json() for x in cassette.interactions if x.reply]
    assert [(row["n"], row["base"], row["model"]) for row in rows] == [(1, 0, odd), (2, 1, odd)]
    # An exchange committed alone under the same run comes after them, in its own row.
    alone = TracedModel(ScriptedModel(["late"]), store, "r")
    await alone.complete(_request([{"role": "user", "content": "q"}], []))
    assert [row["n"] for row in exchange_rows(opener(), "r")] == [1, 2, 3]
    assert [x.reply.text for x in load_exchanges(opener(), "r") if x.reply] == [None, "tab\x1fand\nline", "late"]


async def test_a_store_of_one_row_an_exchange_reads_back_and_its_run_goes_on_in_batches(opener: Any) -> None:
    old = opener(MIGRATIONS[:5])  # as the previous version made stores: tools once, a row an exchange
    old.create_run(run_id="r", kind="agent", status="running")
    tools = [_tool("read")]
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    sent, prefix = [], 0
    with old._write() as tx:
        for n in (1, 2):
            sent.append(_request(history, tools))
            request = _old_request_json(history[prefix:], tools) if n == 1 else to_json(
                {"messages": history[prefix:], "tool_choice": "auto"}
            ).decode()  # fmt: skip
            tx.execute(
                "INSERT INTO model_exchanges (run_id, n, base, prefix, model, request, reply, error, ts, tools_from)"
                " VALUES ('r', ?, ?, ?, 'm', ?, ?, NULL, 0, ?)",
                (n, n - 1, prefix, request, ModelReply(text=f"answer {n}").model_dump_json(), None if n == 1 else 1),
            )
            prefix = len(history)
            history += [{"role": "assistant", "content": f"answer {n}"}, {"role": "user", "content": f"more {n}"}]
    old.close()
    new = opener()
    assert new.schema_version() == len(MIGRATIONS)
    await _go_on(new, history, tools, sent, ["three", "four"])
    exchanges = load_exchanges(opener(), "r")
    assert [x.request.model_dump_json() for x in exchanges] == [r.model_dump_json() for r in sent]
    assert [(row["n"], row["tools_from"]) for row in exchange_rows(new, "r")] == [(1, None), (2, 1), (3, None), (4, 3)]


async def test_exchanges_committed_without_a_batch_row_to_ride_in_are_rows_of_their_own(opener: Any) -> None:
    from loopwarden.events import UnknownEvent

    class Indented(UnknownEvent):  # writes its own JSON, with line breaks: its batch goes to `events`
        def model_dump_json(self, **kwargs: Any) -> str:
            return super().model_dump_json(indent=2)

    store = opener()
    store.create_run(run_id="r", kind="agent", status="running")
    writer = RunWriter(store, "r")
    writer.opened = True
    model = TracedModel(ScriptedModel(["one", "two", "three"]), store, "r", writer)
    sent = [_request([{"role": "user", "content": f"q{i}"}], [_tool("read")]) for i in range(3)]
    await model.complete(sent[0])
    assert await writer.flush() == []  # an exchange and no event: a row of `model_exchanges`
    await model.complete(sent[1])
    writer.events.append(Indented(type="indented", run_id="r", seq=1, ts=0.0))
    await writer.flush()  # the events' rows are in `events`: so is the exchange in its table
    await model.complete(sent[2])
    writer.events.append(UnknownEvent(type="plain", run_id="r", seq=2, ts=0.0))
    await writer.flush()  # a batch row: the exchange rides in it
    writer.events.append(UnknownEvent(type="plain", run_id="r", seq=3, ts=0.0))
    await writer.flush()  # a batch row without exchanges after the one with: numbering reads past it
    await TracedModel(ScriptedModel(["four"]), opener(), "r").complete(sent[0])
    table = store._connection().execute("SELECT n FROM model_exchanges WHERE run_id = 'r' ORDER BY n").fetchall()
    assert [row[0] for row in table] == [1, 2, 4]
    assert [row["n"] for row in exchange_rows(opener(), "r")] == [1, 2, 3, 4]
    read = load_exchanges(opener(), "r")
    assert [x.request.model_dump_json() for x in read] == [r.model_dump_json() for r in [*sent, sent[0]]]
    assert [e.type for e in opener().events("r")] == ["indented", "plain", "plain"]


@pytest.mark.parametrize("ts", [1796279287.1033506, 0.1 + 0.2, 1e-05, 1.5e-05, 1e16, 1.7976931348623157e308, 0.0, 5.0])
def test_an_exchange_lines_time_reads_back_as_the_same_float(ts: float) -> None:
    from loopwarden.trace.rows import exchange_line, read_exchange_line

    line = exchange_line(3, 2, 4, json.dumps("m\x1f\n"), ts, None, '{"messages":[]}', None, '{"kind":"x"}')
    row = read_exchange_line(line)
    assert row["ts"] == ts and type(row["ts"]) is float
    assert (row["n"], row["base"], row["prefix"], row["model"], row["tools_from"]) == (3, 2, 4, "m\x1f\n", None)
    assert (row["request"], row["reply"], row["error"]) == ('{"messages":[]}', None, '{"kind":"x"}')
