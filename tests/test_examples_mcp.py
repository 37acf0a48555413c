"""examples/mcp_agent.py runs as a new user would run it, offline, against the notes MCP server of
loopwarden.examples.mcp_notes: started by the example over stdio, and reached over streamable HTTP
on 127.0.0.1 (a server process this test starts)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from mcpkit import http_server, watchdog

# Looked up, not imported: the example and its server run in processes of their own, and
# `pytest.importorskip("mcp")` imported the SDK (about 1.3 s of CPU) into every xdist worker at collection.
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the mcp extra is not installed"),
    pytest.mark.usefixtures(watchdog.__name__),
]
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mcp_agent.py"


def run_example(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=240, cwd=EXAMPLE.parents[1]
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def check(out: str) -> None:
    assert "server 'notes': 205 tools" in out
    assert "notes__read_note: read\n" in out and "notes__delete_note: write, needs approval" in out
    assert "offered on the first turn: ['search_tools']" in out  # 205 schemas stay behind tool search
    assert "stuck model: status=degraded stop_reason=repeated_call" in out
    assert "read_note ran 1 time(s) on the server" in out  # the server's own count: repeats never reached it
    assert "approval asked: notes__delete_note {'name': 'todo'}" in out
    assert "delete_note: ok=False error_type=denied" in out
    assert "notes on the server: {'result': ['probe', 'pump', 'todo']}" in out  # the denied delete never ran


def test_the_mcp_example_over_stdio() -> None:
    check(run_example())


def test_the_mcp_example_over_streamable_http() -> None:
    with http_server("-m", "loopwarden.examples.mcp_notes", "--http", "0", "--catalogue", "200") as url:
        assert url.startswith("http://127.0.0.1:")
        check(run_example("--url", url))
