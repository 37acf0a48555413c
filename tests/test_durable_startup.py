"""Bad database settings at start-up: `loopwarden serve` and `loopwarden worker` say what is wrong
in one line and exit 2, with no traceback and no password echoed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from durable_kit import needs_durable

pytestmark = needs_durable


def closed_port() -> int:
    """A port nothing listens on (bound and released: connecting is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def start(command: list[str], url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPWARDEN_DATABASE_URL": url}
    env.pop("LOOPWARDEN_TOKEN", None)
    full = [sys.executable, "-m", "loopwarden.cli", *command, "--state-dir", str(tmp_path / "state")]
    return subprocess.run(full, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"]])
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://root:hunter2@db/runs", "must be a postgresql://"),
        ("postgresql://lw:hunter2@127.0.0.1:{port}/runs", "cannot use the database postgresql://lw:***@127.0.0.1"),
    ],
)
def test_a_wrong_or_unreachable_database_is_one_clear_line(
    tmp_path: Path, command: list[str], url: str, says: str
) -> None:
    result = start(command, url.format(port=closed_port()), tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]
    assert "Traceback" not in result.stderr and "hunter2" not in result.stderr


def test_a_worker_without_a_shared_database_says_how_to_run_durably(tmp_path: Path) -> None:
    result = start(["worker"], "", tmp_path)
    assert result.returncode == 2 and "LOOPWARDEN_DATABASE_URL=postgresql://" in result.stderr
    assert "loopwarden serve --durable" in result.stderr and "Traceback" not in result.stderr
