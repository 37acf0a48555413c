"""The README's durable-runs commands, executed: each starts (on a temporary folder and the test
Postgres) and becomes ready. (tests/test_readme.py runs the section's Python block.)"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import httpx

from durable_kit import HTTP, env_for, fresh_database, log_tail, needs_durable, spawn, stop, wait_for
from server_jobs import free_port

pytestmark = needs_durable
README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "### Durable runs"


def blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ")]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_the_commands_start_and_become_ready(tmp_path: Path) -> None:
    (code,) = blocks("bash")
    lines = [line.split("#")[0].strip() for line in code.strip().splitlines()]
    data = tmp_path / "lab-data"
    data.mkdir()
    with fresh_database() as url:
        database: str | None = None
        for line in lines:
            if line.startswith("export LOOPWARDEN_DATABASE_URL="):
                database = url  # the README's URL stands for a real server: use the test one
                continue
            paths = {"~/lab-data": str(data), "/shared/lab-data": str(data)}
            argv = [paths.get(a, a) for a in shlex.split(line)]
            assert argv[0] == "loopwarden", line
            command = [sys.executable, "-m", "loopwarden.cli", *argv[1:], "--state-dir", str(tmp_path / argv[1])]
            port = free_port()
            if argv[1] == "serve":
                command += ["--port", str(port)]
            process = spawn(command, env_for(database), tmp_path / f"{argv[1]}-{port}.log")
            try:
                if argv[1] == "serve":
                    wait_for(lambda port=port: _healthy(port), f"`{line}` to answer", alive=process)
                else:
                    wait_for(lambda p=process: " ready on " in log_tail(p), f"`{line}` to be ready", alive=process)
                    assert "worker worker-1 ready" in log_tail(process)
            finally:
                stop(process)


def _healthy(port: int) -> bool:
    try:
        return HTTP.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
