"""Real MCP server processes for the tests (tests/mcp_servers/toolbox.py): over stdio, and over
streamable HTTP on 127.0.0.1 (the server binds a free port itself and prints it once listening)."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loopwarden.mcptools import MCPTools, python_server

TOOLBOX = str(Path(__file__).parent / "mcp_servers" / "toolbox.py")
READY_WITHIN_S = 120.0  # a bound, not a pause: a loaded 2-core machine can take long to import the SDK


def toolbox(*args: str, **options: Any) -> MCPTools:
    """The toolbox server over stdio (not yet open)."""
    return python_server(TOOLBOX, "stdio", *args, **options)


@contextmanager
def toolbox_http(*args: str) -> Iterator[str]:
    """The toolbox server over streamable HTTP; yields its URL, stops the process after."""
    process = subprocess.Popen(
        [sys.executable, TOOLBOX, "http", *args], stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + READY_WITHIN_S
            line = ""
            while not line.startswith("port "):
                left = deadline - time.monotonic()
                if left <= 0 or process.poll() is not None:
                    raise RuntimeError(f"MCP HTTP server not ready (exit code {process.poll()})")
                if selector.select(left):
                    line = process.stdout.readline()
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
