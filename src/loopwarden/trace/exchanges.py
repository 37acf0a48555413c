"""Model exchanges in the run store: what each model call of a run was sent and what it
answered (or how it failed), so a stored run can become a cassette and then an eval case.

Why deltas: a run's requests repeat the whole history each turn, so each row keeps only the
messages added since an earlier row of the same run (`base`, sharing `prefix` messages), like
cassette v2; a long run's rows grow linearly, not quadratically. Likewise the offered tools
(the same list every call, ~290 bytes here, often KBs): a request whose tools are those of an
earlier row of the run is stored without its "tools", and `tools_from` names that row
(migration 5; NULL: the request holds its own, as every row written before did).

The exchanges a run's writer commits go in the row of the events they are committed with
(`event_batches.exchanges`, migration 6), a line each (rows.exchange_line); an exchange committed
alone is a `model_exchanges` row, as every exchange was before. `exchange_rows` reads both.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from functools import partial
from typing import Any

from pydantic_core import to_json

from ..models.base import Model, ModelError, ModelReply, ModelRequest
from ..models.cassette import Cassette, Interaction, RecordedError
from .rows import EXCHANGE_BATCHES, INSERT_EXCHANGE, exchange_line, last_exchange, on_sqlite, read_exchange_line
from .store import RunStore
from .writer import RunWriter

FIELDS = ("n", "base", "prefix", "model", "ts", "tools_from", "request", "reply", "error")
"""An exchange's fields, as `exchange_rows` gives them."""


def append_exchange(
    store: RunStore,
    run_id: str,
    *,
    model: str,
    request: ModelRequest,
    reply: ModelReply | None,
    error: RecordedError | None,
    base: int = 0,
    prefix: int = 0,
) -> int:
    """Commit one exchange and return its number (1, 2, ... per run, numbered by the store so
    several models of one run, e.g. pipeline phases under one run id, never collide)."""
    data = request.model_dump(mode="json")
    data["messages"] = data["messages"][prefix:]
    with store._write() as tx:
        return insert_exchange(
            tx,
            run_id,
            model=model,
            request_json=json.dumps(data, ensure_ascii=False),
            reply_json=None if reply is None else reply.model_dump_json(),
            error_json=None if error is None else error.model_dump_json(),
            base=base,
            prefix=prefix,
        )


def insert_exchange(
    tx: Any,
    run_id: str,
    *,
    model: str,
    request_json: str,
    reply_json: str | None,
    error_json: str | None,
    base: int,
    prefix: int,
    n: int | None = None,
    tools_from: int | None = None,
) -> int:
    """Write one exchange row in the open transaction `tx`; returns its number (`n`, if given,
    else the run's next). The run's row is made if it is missing."""
    now = time.time()
    # A model call before the run's first event still has a run row to hang on. ON CONFLICT, not
    # SQLite's INSERT OR IGNORE, which Postgres refuses (a syntax error there: such a call failed).
    tx.execute(
        "INSERT INTO runs (id, kind, status, created_at, updated_at) VALUES (?, 'agent', 'running', ?, ?)"
        " ON CONFLICT (id) DO NOTHING",
        (run_id, now, now),
    )
    if n is None:
        n = last_exchange(tx, run_id) + 1
    tx.execute(INSERT_EXCHANGE, (run_id, n, base, prefix, model, request_json, reply_json, error_json, now, tools_from))
    return n


def exchange_rows(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """A run's stored exchanges in call order, as `model_exchanges` rows are (FIELDS, the JSON
    as written): the rows of that table and the lines of its events' batch rows."""
    conn = store._connection()
    rows = [
        dict(row)
        for row in conn.execute(
            f"SELECT {', '.join(FIELDS)} FROM model_exchanges WHERE run_id = ? ORDER BY n",
            (run_id,),
        ).fetchall()
    ]
    kept = len(rows)
    batches = conn.execute(EXCHANGE_BATCHES[on_sqlite(conn)], (run_id, 0, -1 if on_sqlite(conn) else None)).fetchall()
    rows += [read_exchange_line(line) for batch in batches for line in batch[0].split("\n")]
    if kept and len(rows) > kept:
        rows.sort(key=lambda row: int(row["n"]))
    return rows


def load_exchanges(store: RunStore, run_id: str) -> list[Interaction]:
    """A run's exchanges in call order, each request's full history rebuilt from its base and
    its tools from the row that holds them."""
    rows = exchange_rows(store, run_id)
    holders = {int(row["tools_from"]) for row in rows if row["tools_from"] is not None}
    tools_json: dict[int, str] = {}  # a holder's tools, parsed afresh for each row: no list is shared
    histories: dict[int, list[Any]] = {}
    interactions: list[Interaction] = []
    for row in rows:
        request = json.loads(row["request"])
        if row["tools_from"] is not None:
            held = tools_json.get(int(row["tools_from"]))
            if held is not None:  # as a missing base gives no history: a row that is not there gives none
                request["tools"] = json.loads(held)
        elif int(row["n"]) in holders:
            tools_json[int(row["n"])] = json.dumps(request.get("tools", []))
        shared = histories.get(int(row["base"]), [])[: int(row["prefix"])]
        request["messages"] = shared + request.get("messages", [])
        histories[int(row["n"])] = request["messages"]
        interactions.append(
            Interaction(
                request=ModelRequest.model_validate(request),
                reply=None if row["reply"] is None else ModelReply.model_validate_json(row["reply"]),
                error=None if row["error"] is None else RecordedError.model_validate_json(row["error"]),
            )
        )
    return interactions


def _json(model: ModelReply | RecordedError) -> str:
    """`model_dump_json()`, byte for byte, by the serializer itself (as Event.to_json: no keyword
    arguments passed on; tests/test_trace_agent.py compares the two)."""
    return model.__pydantic_serializer__.to_json(model).decode()


def cassette_for_run(store: RunStore, run_id: str) -> Cassette:
    """A stored run's model traffic as a cassette (ReplayModel plays it back)."""
    rows = exchange_rows(store, run_id)
    if not rows:
        raise ValueError(f"run {run_id!r} has no model calls in {store.path} (was it traced?)")
    return Cassette(model=str(rows[0]["model"]), interactions=load_exchanges(store, run_id), meta={"run_id": run_id})


class TracedModel:
    """Passes each request to `inner` and keeps the exchange: with a `RunWriter` (Agent(trace=...)),
    in the transaction of the run's next events, so it is durable before any of them is streamed;
    alone, committed before the reply goes on. One per run: it stores only the messages added
    since its previous request, and serialises nothing twice (the offered tools once per set)."""

    def __init__(self, inner: Model, store: RunStore, run_id: str, writer: RunWriter | None = None) -> None:
        self.inner, self.store, self.run_id, self.writer = inner, store, run_id, writer
        self.name = inner.name
        self._model_json = json.dumps(inner.name)  # as its exchanges' lines name it
        self._sent: list[Any] = []  # the previous request's messages (its list)
        self._last_n = 0  # the number of this model's previous row
        self._tools_json: dict[tuple[int, ...], tuple[list[Any], str]] = {}  # the lists kept: ids stay theirs
        # The tools last written whole: their key, their row, and the dicts (kept: ids stay theirs).
        self._tools_at: tuple[tuple[int, ...], int, list[Any]] | None = None

    async def complete(self, request: ModelRequest) -> ModelReply:
        try:
            reply = await self.inner.complete(request)
        except ModelError as error:
            recorded = RecordedError(
                kind=error.kind, message=error.message, retryable=error.retryable, status=error.status
            )
            committing = self._keep(request, None, recorded)
            if committing is not None:
                await committing
            raise
        except Exception as error:  # kept too: an unexpected failure is what a trace is read for
            committing = self._keep(request, None, RecordedError(kind=type(error).__name__, message=str(error)))
            if committing is not None:
                await committing
            raise
        committing = self._keep(request, reply, None)
        if committing is not None:
            await committing
        return reply

    def _keep(
        self, request: ModelRequest, reply: ModelReply | None, error: RecordedError | None
    ) -> Coroutine[Any, Any, None] | None:
        """Keep the exchange: with the run's writer, pending for its next commit (None returned:
        nothing to wait for; not a coroutine, which was a coroutine made and awaited per model
        call); alone, the commit to await (in a worker thread)."""
        # The runtime only appends to its history: when the previous request's messages lead
        # this one (the same dicts, so the comparison is by identity first), store what was added.
        # The previous request's own list is kept, not a copy (each request has its list: the
        # runtime makes one a call, validation another); a list handed in again, perhaps changed
        # in place since, is compared with nothing and stored whole. A copy a call was O(history):
        # ~0.15 ms of a 100-call traced run (bench/README.md, 4 December 2026, afternoon).
        messages, sent = request.messages, self._sent
        shared = len(sent) if messages is not sent and messages[: len(sent)] == sent else 0
        self._sent = messages
        head, key, (offered, tools) = self._request_json(request, messages[shared:])
        reply_json = None if reply is None else _json(reply)
        error_json = None if error is None else _json(error)

        writer = self.writer
        if writer is not None and writer.opened:  # the run's row is there: the writer inserts the row
            # A partial, not a closure: a function that nests one has a cell made for each
            # variable the closure reads at every call, objects the garbage collector tracks
            # (eleven here); two objects instead of thirteen an exchange (bench/README.md,
            # 4 December 2026).
            now = time.time()
            row = partial(
                TracedModel._line, self, writer, shared, head, key, offered, tools, reply_json, error_json, now
            )
            writer.exchanges.append(row)
            return None
        return self._keep_alone(writer, shared, head, key, offered, tools, reply_json, error_json)

    def _line(
        self, writer: RunWriter, shared: int, head: str, key: tuple[int, ...], offered: list[Any], tools: str,
        reply_json: str | None, error_json: str | None, now: float, tx: Any,
    ) -> tuple[int, str]:  # fmt: skip
        """The exchange's number and line, made at its commit (given its transaction)."""
        # Lines are made in call order, so the line that holds these tools has its number.
        n = writer.next_exchange(tx)
        base, self._last_n = (self._last_n if shared else 0), n
        model, at = self._model_json, self._tools_at
        if at is not None and at[0] == key:
            return n, exchange_line(n, base, shared, model, now, at[1], head, reply_json, error_json)
        self._tools_at = key, n, offered
        request = _with_tools(head, tools)
        return n, exchange_line(n, base, shared, model, now, None, request, reply_json, error_json)

    def _keep_alone(
        self, writer: RunWriter | None, shared: int, head: str, key: tuple[int, ...], offered: list[Any],
        tools: str, reply_json: str | None, error_json: str | None,
    ) -> Coroutine[Any, Any, None] | None:  # fmt: skip
        """`_keep` before the run's row is there, or without a run's writer: a row of its own."""

        def write(tx: Any) -> None:  # the tools written whole: later rows may point here
            self._last_n = insert_exchange(
                tx,
                self.run_id,
                model=self.name,
                request_json=_with_tools(head, tools),
                reply_json=reply_json,
                error_json=error_json,
                base=self._last_n if shared else 0,
                prefix=shared,
                n=None if writer is None else writer.next_exchange(tx),
            )
            self._tools_at = key, self._last_n, offered

        if writer is not None:  # a model called before the run's first event: its row may be missing
            writer.add_rows(write)
            return None

        def commit() -> None:  # in a worker thread, so the event loop never waits on SQLite
            with self.store._write() as tx:
                write(tx)

        return asyncio.to_thread(commit)

    def _request_json(
        self, request: ModelRequest, added: list[Any]
    ) -> tuple[str, tuple[int, ...], tuple[list[Any], str]]:
        """The request's JSON without its tools (the messages `added`, tool_choice, max_tokens if
        set), the tools' key (their ids: the runtime offers the same dicts each call), the tools
        and their JSON."""
        key = tuple(map(id, request.tools))
        kept = self._tools_json.get(key)
        if kept is None:
            if len(self._tools_json) >= 64:
                self._tools_json.clear()
            kept = self._tools_json[key] = (list(request.tools), json.dumps(request.tools, ensure_ascii=False))
        # pydantic_core's encoder: the JSON json.dumps(..., ensure_ascii=False, default=str) would
        # write, without its spaces, in a sixth of the time (tool results are long strings).
        head_of: dict[str, Any] = {"messages": added, "tool_choice": request.tool_choice}
        if request.max_tokens is not None:  # a capped call (a stage's cap, a retry halved after a
            # timeout) replays as capped; absent, as in rows written before it was kept: None.
            head_of["max_tokens"] = request.max_tokens
        try:
            head = to_json(head_of, fallback=str).decode()
        except ValueError:  # what it will not write (bytes that are not UTF-8): as json writes it
            head = json.dumps(head_of, ensure_ascii=False, default=str)
        return head, key, kept


def _with_tools(head: str, tools: str) -> str:
    """A request's JSON without its tools (`head`, an object) with the tools' JSON added last."""
    return f'{head[:-1]}, "tools": {tools}}}'
