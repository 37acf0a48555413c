"""API keys never reach the databases of durable runs (durable/secrets.py), with real processes on
real SQLite files and a real Postgres. A run's configuration is stored as its workflow's input;
the key in it is replaced by a reference, and the process that runs the workflow finds the key
again: its own memory (the embedded server that took the submission), the environment variable
that held it, or its own configured endpoint for the same base URL. Afterwards no byte of either
key is in any table, raw or inside base64 (how DBOS stores pickled inputs)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import signal
from pathlib import Path

from durable_kit import (
    demo_folder,
    fresh_database,
    needs_durable,
    read_log,
    serve,
    submit,
    wait_finished,
    wait_for,
    worker,
)

pytestmark = needs_durable

RUN_KEY = "sk-per-run-0d6f1c2b9e8a47c3b5f0"
ENV_KEY = "sk-from-env-7a41e09c3d2b4f18a6c5"
ENDPOINT = "http://127.0.0.1:9/v1"  # never called: the demo job's model is scripted
_BASE64 = re.compile(rb"[A-Za-z0-9+/]{16,}={0,2}")


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def decoded(blob: bytes) -> list[bytes]:
    """Every base64 run in `blob`, decoded."""
    texts = []
    for token in _BASE64.findall(blob):
        for cut in range(4):  # a token may start mid-quantum when glued to other text
            piece = token[cut:]
            try:
                texts.append(base64.b64decode(piece + b"=" * (-len(piece) % 4)))
            except (binascii.Error, ValueError):
                continue
    return texts


def keys_in(blob: bytes) -> list[str]:
    """Which keys occur in `blob`, as they are or inside base64."""
    texts = [blob, *decoded(blob)]
    return [key for key in (RUN_KEY, ENV_KEY) if any(key.encode() in text for text in texts)]


def holds_pickled_config(blob: bytes) -> bool:
    """The scan does see the stored workflow inputs: the configuration's endpoint is there."""
    return any(ENDPOINT.encode() in text for text in decoded(blob))


def postgres_dump(url: str) -> bytes:
    """Every row of every table of the database (all schemas: the run store's and DBOS's)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables"
            " WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        assert any(name.startswith("dbos.") for (name,) in tables)
        rows = [conn.execute(f"SELECT t::text FROM {name} t").fetchall() for (name,) in tables]
    return "\n".join(row[0] for table in rows for row in table).encode()


def sqlite_files(state: Path) -> bytes:
    """The run store's and DBOS's database files, with their journals."""
    files = [p for p in sorted(state.iterdir()) if p.is_file() and (".sqlite" in p.name or ".db" in p.name)]
    assert {"runs.db", "dbos.sqlite"} <= {p.name for p in files}
    return b"".join(p.read_bytes() for p in files)


def model_settings(key: str | None) -> dict[str, object]:
    return {"model": {"base_url": ENDPOINT, "model": "m", **({"api_key": key} if key else {})}}


def test_no_key_in_postgres_and_workers_find_their_own(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    given = demo_folder(allowed, "given", turns=2, keys_log=str(tmp_path / "given.keys.jsonl"))
    from_env = demo_folder(allowed, "from_env", turns=2, keys_log=str(tmp_path / "from_env.keys.jsonl"))
    api_env = {"LOOPWARDEN_API_KEY": ENV_KEY}
    worker_env = {"LOOPWARDEN_API_KEY": ENV_KEY, "LOOPWARDEN_BASE_URL": ENDPOINT, "LOOPWARDEN_MODEL": "m"}
    with (
        fresh_database() as url,
        serve(tmp_path / "api", allowed, database_url=url, env=api_env) as (api, base),
        worker(tmp_path / "w", url, env=worker_env) as work,
    ):
        ids = [submit(base, given.name, **model_settings(RUN_KEY)), submit(base, from_env.name, **model_settings(None))]
        for run_id in ids:
            wait_finished(base, run_id, "the run to finish", alive=[api, work])
        dump = postgres_dump(url)

    assert keys_in(dump) == []
    assert holds_pickled_config(dump)
    # The key given with the submission stayed in the API process; the worker used the key configured
    # for that endpoint in its own environment. The key from the environment came from the worker's.
    assert [k["key_sha256"] for k in read_log(tmp_path / "given.keys.jsonl")] == [digest(ENV_KEY)]
    assert [k["key_sha256"] for k in read_log(tmp_path / "from_env.keys.jsonl")] == [digest(ENV_KEY)]


def test_no_key_in_sqlite_and_a_restarted_server_uses_its_own(tmp_path: Path) -> None:
    allowed, state = tmp_path / "allowed", tmp_path / "state"
    release = tmp_path / "release"
    folder = demo_folder(
        allowed, "held", turns=4, hold_turn=2, release_file=str(release), keys_log=str(tmp_path / "keys.jsonl")
    )
    tools = allowed / "logs" / "held.tools.jsonl"
    with serve(state, allowed) as (process, base):
        run_id = submit(base, folder.name, **model_settings(RUN_KEY))
        wait_for(lambda: any(t["tool"] == "slow_write" for t in read_log(tools)), "slow_write to start", alive=process)
        assert keys_in(sqlite_files(state)) == []
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
    release.touch()
    restarted_env = {"LOOPWARDEN_API_KEY": ENV_KEY, "LOOPWARDEN_BASE_URL": ENDPOINT, "LOOPWARDEN_MODEL": "m"}
    with serve(state, allowed, env=restarted_env) as (process, base):
        wait_finished(base, run_id, "the resumed run to finish", alive=process)
    assert keys_in(sqlite_files(state)) == [] and holds_pickled_config(sqlite_files(state))
    # Before the kill the run had the key given with it (held in memory); after, the one configured here.
    assert [k["key_sha256"] for k in read_log(tmp_path / "keys.jsonl")] == [digest(RUN_KEY), digest(ENV_KEY)]
