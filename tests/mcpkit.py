"""Real MCP server processes for the tests (tests/mcp_servers/toolbox.py): over stdio, and over
streamable HTTP on 127.0.0.1 (the server binds a free port itself and prints it once listening)."""

from __future__ import annotations

import faulthandler
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from loopwarden.tools.mcp import MCPTools, python_server

TOOLBOX = str(Path(__file__).parent / "mcp_servers" / "toolbox.py")
READY_WITHIN_S = 120.0  # a bound, not a pause: a loaded 2-core machine can take long to import the SDK
HANG_AFTER_S = 300.0
"""A test of these modules still running after this is hung: the process dumps every thread's
stack and exits (a failed run that names the wait, instead of a CI job that never ends)."""


@pytest.fixture
def watchdog() -> Iterator[None]:
    """Use in every MCP test module (`pytestmark = pytest.mark.usefixtures("watchdog")`)."""
    faulthandler.dump_traceback_later(HANG_AFTER_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@contextmanager
def silent_listener() -> Iterator[str]:
    """A URL on 127.0.0.1 whose TCP connections are accepted by the kernel and never answered."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


def silent_stdio(pid_file: Path, **options: Any) -> MCPTools:
    """A process that writes its pid to `pid_file`, then reads nothing and says nothing: a stdio
    server that never answers `initialize` (not yet open)."""
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(3600)"
    return MCPTools.stdio(sys.executable, ["-c", code], **options)


def gone_within(pid: int, seconds: float = 60.0) -> bool:
    """Whether process `pid` has exited and been reaped (its /proc entry is gone) within `seconds`."""
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def toolbox(*args: str, **options: Any) -> MCPTools:
    """The toolbox server over stdio (not yet open)."""
    return python_server(TOOLBOX, "stdio", *args, **options)


def toolbox_http(*args: str) -> AbstractContextManager[str]:
    """The toolbox server over streamable HTTP; yields its URL, stops the process after."""
    return http_server(TOOLBOX, "http", *args)


@contextmanager
def http_server(*argv: str) -> Iterator[str]:
    """`python argv...`, a server that prints `listening on URL` once it listens; yields the URL,
    kills the process after."""
    process = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + READY_WITHIN_S
            line = ""
            while not line.startswith("listening on "):
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    raise RuntimeError(f"MCP HTTP server not ready (exit code {process.poll()})")
                if selector.select(left):
                    line = process.stdout.readline()
        yield line.split()[-1]
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
