"""A real MCP server for the tests (the official SDK's MCPServer, once FastMCP): tools that answer,
fail, crash, hang and carry annotations. `python toolbox.py stdio` or `python toolbox.py http`
(binds 127.0.0.1 on a free port and prints `listening on URL` on stdout once it listens); `--many N` adds N
generated catalogue tools."""

from __future__ import annotations

import argparse
import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from loopwarden.examples.mcp_notes import add_catalogue, serve_http

server = MCPServer("toolbox")
STATE = {"counter": 0}
LOG: list[str] = []


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return f"{city}: 11.5 degrees, light rain"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {path}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
def set_flag(name: str, value: bool) -> dict[str, object]:
    """Set a named flag."""
    return {"name": name, "value": value}


@server.tool()
def increment() -> int:
    """Add one to the server's counter and return it."""
    STATE["counter"] += 1
    return STATE["counter"]


@server.tool()
async def append_entry(entry: str, seconds: float = 0.0) -> int:
    """Append an entry to the server's log, then wait; returns how many entries the log holds."""
    LOG.append(entry)
    await anyio.sleep(seconds)
    return len(LOG)


@server.tool()
def refuse(reason: str) -> str:
    """A tool that always fails with the reason given."""
    raise ToolError(f"refused: {reason}")


@server.tool(name="fs__read")
def fs_read(path: str) -> str:
    """A tool whose own name holds the wire namespace separator."""
    return f"contents of {path}"


@server.tool()
def crash() -> str:
    """Kill the server process mid-call (no reply ever comes)."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
async def stall(seconds: float) -> str:
    """Wait before answering."""
    await anyio.sleep(seconds)
    return "woke"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--many", type=int, default=0)
    args = parser.parse_args()
    add_catalogue(server, args.many)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        serve_http(server)


if __name__ == "__main__":
    main()
