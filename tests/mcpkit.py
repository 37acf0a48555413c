"""Real MCP server processes for the tests (tests/mcp_servers/toolbox.py): over stdio, and over
streamable HTTP on 127.0.0.1 (the server binds a free port itself and prints it once listening).

Each toolbox start is a process of its own, forked by one zygote per test process (mcp_servers/zygote.py)
that imported the SDK once: started as `python toolbox.py`, each imported the SDK again (about 1.3 s
of CPU, 14 starts in the MCP tests). The client still spawns a process and speaks to the server over
that process's pipes (mcp_servers/launch.py hands them to the forked server)."""

from __future__ import annotations

import atexit
import faulthandler
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from loopwarden.tools.mcp import MCPTools

TOOLBOX = str(Path(__file__).parent / "mcp_servers" / "toolbox.py")
ZYGOTE = str(Path(__file__).parent / "mcp_servers" / "zygote.py")
LAUNCH = str(Path(__file__).parent / "mcp_servers" / "launch.py")
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
    """The toolbox server over stdio (not yet open), forked by the zygote."""
    return MCPTools.stdio(sys.executable, [*_launch(), "stdio", *args], **options)


def toolbox_http(*args: str) -> AbstractContextManager[str]:
    """The toolbox server over streamable HTTP, forked by the zygote; yields its URL, stops the process after."""
    return http_server(*_launch(), "http", *args)


_zygotes: list[tuple[subprocess.Popen[str], str]] = []


def _launch() -> list[str]:
    """The arguments (after `python`) of a toolbox start through this process's zygote, started
    at the first use; it exits with this process (its stdin closes)."""
    if not _zygotes:
        socket_path = str(Path(tempfile.mkdtemp(prefix="mcp-zygote-")) / "socket")
        process = subprocess.Popen(
            [sys.executable, ZYGOTE, socket_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None
        if _ready_line(process, process.stdout, "ready") is None:
            process.kill()
            process.wait()
            raise RuntimeError(f"the MCP zygote did not start (exit code {process.poll()})")
        atexit.register(_stop_zygote, process, Path(socket_path).parent)
        _zygotes.append((process, socket_path))
    return ["-I", "-S", LAUNCH, _zygotes[0][1]]


def _stop_zygote(process: subprocess.Popen[str], folder: Path) -> None:
    """Close its stdin and wait: it waits for its watchers first (mcp_servers/zygote.py LAST_WAIT_S).
    Then remove its socket's folder (each test process left one in the temporary directory)."""
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    shutil.rmtree(folder, ignore_errors=True)


def _ready_line(process: subprocess.Popen[str], stdout: Any, prefix: str) -> str | None:
    """The first line of `stdout` starting with `prefix`, or None when the process exits or
    READY_WITHIN_S passes first."""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + READY_WITHIN_S
        line = ""
        while not line.startswith(prefix):
            left = deadline - time.monotonic()
            if left <= 0 or process.poll() is not None:
                return None
            if selector.select(left):
                line = stdout.readline()
    return line


@contextmanager
def http_server(*argv: str) -> Iterator[str]:
    """`python argv...`, a server that prints `listening on URL` once it listens; yields the URL,
    kills the process after."""
    process = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert process.stdout is not None
        line = _ready_line(process, process.stdout, "listening on ")
        if line is None:
            raise RuntimeError(f"MCP HTTP server not ready (exit code {process.poll()})")
        yield line.split()[-1]
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
