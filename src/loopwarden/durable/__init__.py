"""Durable runs on DBOS Transact (the `durable` extra): a run is a workflow, each model call and
each tool execution a step whose recorded output is replayed after a crash, approvals are durable
waits, and runs can be shared by many worker processes through Postgres.

- steps.py: what becomes a step, the exactly-once boundary, `idempotency_key()` for tools.
- workflow.py: the run workflow and how its events reach the run store.
- engine.py: starting DBOS in a process; worker slots and recovery of a dead worker's runs.
- database.py: `LOOPWARDEN_DATABASE_URL` (Postgres) or the embedded SQLite default.
- service.py: the server's runner for durable runs; cli.py: `loopwarden worker`.
- demo.py: a scripted job to try it with.

Nothing here is imported unless durability is asked for; without it the loop pays one
context-variable read per run (hooks.py).
"""

from ..hooks import idempotency_key

__all__ = ["idempotency_key"]
