"""Model exchanges in the run store: what each model call of a run was sent and what it
answered (or how it failed), so a stored run can become a cassette and then an eval case.

Why deltas: a run's requests repeat the whole history each turn, so each row keeps only the
messages added since an earlier row of the same run (`base`, sharing `prefix` messages), like
cassette v2; a long run's rows grow linearly, not quadratically.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ..models.base import Model, ModelError, ModelReply, ModelRequest
from ..models.cassette import Cassette, Interaction, RecordedError
from .store import RunStore


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
    now = time.time()
    with store._write() as tx:
        # A model call before the run's first event (none today) still has a run row to hang on.
        tx.execute(
            "INSERT OR IGNORE INTO runs (id, kind, status, created_at, updated_at)"
            " VALUES (?, 'agent', 'running', ?, ?)",
            (run_id, now, now),
        )
        row = tx.execute("SELECT COALESCE(MAX(n), 0) FROM model_exchanges WHERE run_id = ?", (run_id,)).fetchone()
        n = int(row[0]) + 1
        tx.execute(
            "INSERT INTO model_exchanges (run_id, n, base, prefix, model, request, reply, error, ts)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                n,
                base,
                prefix,
                model,
                json.dumps(data, ensure_ascii=False),
                None if reply is None else reply.model_dump_json(),
                None if error is None else error.model_dump_json(),
                now,
            ),
        )
    return n


def load_exchanges(store: RunStore, run_id: str) -> list[Interaction]:
    """A run's exchanges in call order, each request's full history rebuilt from its base."""
    rows = (
        store._connection()
        .execute(
            "SELECT n, base, prefix, request, reply, error FROM model_exchanges WHERE run_id = ? ORDER BY n", (run_id,)
        )
        .fetchall()
    )
    histories: dict[int, list[Any]] = {}
    interactions: list[Interaction] = []
    for row in rows:
        request = json.loads(row["request"])
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


def cassette_for_run(store: RunStore, run_id: str) -> Cassette:
    """A stored run's model traffic as a cassette (ReplayModel plays it back)."""
    row = (
        store._connection()
        .execute("SELECT model FROM model_exchanges WHERE run_id = ? ORDER BY n LIMIT 1", (run_id,))
        .fetchone()
    )
    interactions = load_exchanges(store, run_id)
    if row is None or not interactions:
        raise ValueError(f"run {run_id!r} has no model calls in {store.path} (was it traced?)")
    return Cassette(model=str(row["model"]), interactions=interactions, meta={"run_id": run_id})


class TracedModel:
    """Passes each request to `inner` and commits the exchange to the store before the reply
    goes on; one per run (it keeps the previous request to store only what was added)."""

    def __init__(self, inner: Model, store: RunStore, run_id: str) -> None:
        self.inner, self.store, self.run_id = inner, store, run_id
        self.name = inner.name
        self._previous: tuple[int, list[Any]] = (0, [])

    async def complete(self, request: ModelRequest) -> ModelReply:
        try:
            reply = await self.inner.complete(request)
        except ModelError as error:
            recorded = RecordedError(
                kind=error.kind, message=error.message, retryable=error.retryable, status=error.status
            )
            await asyncio.to_thread(self._keep, request, None, recorded)
            raise
        except Exception as error:  # kept too: an unexpected failure is what a trace is read for
            unexpected = RecordedError(kind=type(error).__name__, message=str(error))
            await asyncio.to_thread(self._keep, request, None, unexpected)
            raise
        # Committed before the reply goes on, in a worker thread so the event loop never waits on SQLite.
        await asyncio.to_thread(self._keep, request, reply, None)
        return reply

    def _keep(self, request: ModelRequest, reply: ModelReply | None, error: RecordedError | None) -> None:
        base, previous = self._previous
        # Compared as JSON: the loop may change its message dicts after the request was sent.
        messages: list[Any] = request.model_dump(mode="json")["messages"]
        prefix = len(previous) if messages[: len(previous)] == previous else 0
        n = append_exchange(
            self.store,
            self.run_id,
            model=self.name,
            request=request,
            reply=reply,
            error=error,
            base=base if prefix else 0,
            prefix=prefix,
        )
        self._previous = (n, messages)
