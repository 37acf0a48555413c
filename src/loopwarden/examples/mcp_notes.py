"""An MCP server for the examples: a lab's notes, with tools that read, write and delete, each
annotated as the MCP spec says (the official SDK's `MCPServer`; extra `mcp`).

    python -m loopwarden.examples.mcp_notes              # over stdio (what MCPTools.stdio starts)
    python -m loopwarden.examples.mcp_notes --http 8765  # streamable HTTP on 127.0.0.1:8765/mcp
    python -m loopwarden.examples.mcp_notes --http 0     # on a free port: prints `listening on URL`

`--catalogue N` adds N generated tools (a server with hundreds of tools, as real ones have). Every
call is counted on the server: `served` (read-only) tells how many times each tool really ran.
"""

from __future__ import annotations

import argparse
import socket
from collections import Counter
from collections.abc import Callable

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("notes")
NOTES = {
    "pump": "The pump was run at 3 speeds; flow rose linearly with speed. Peak flow 12.4 L/min.",
    "probe": "Hall probe calibrated on 2026-11-20; offset 0.3 mT, drift below 0.1 mT/h.",
    "todo": "Order spare seals. Repeat the 40 Hz run.",
}
SERVED: Counter[str] = Counter()
READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True)


@server.tool(annotations=READ)
def list_notes() -> list[str]:
    """The names of all notes."""
    SERVED["list_notes"] += 1
    return sorted(NOTES)


@server.tool(annotations=READ)
def read_note(name: str) -> str:
    """The text of one note.

    Args:
        name: the note's name, e.g. pump
    """
    SERVED["read_note"] += 1
    if name not in NOTES:
        raise ToolError(f"no note named {name!r}; the notes are {', '.join(sorted(NOTES))}")
    return NOTES[name]


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def append_note(name: str, text: str) -> str:
    """Add a line to a note (a new note when there is none of that name)."""
    SERVED["append_note"] += 1
    NOTES[name] = f"{NOTES.get(name, '')}\n{text}".strip()
    return f"{name}: {len(NOTES[name])} characters"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def delete_note(name: str) -> str:
    """Delete a note for good."""
    SERVED["delete_note"] += 1
    NOTES.pop(name, None)
    return f"deleted {name}"


@server.tool(annotations=READ)
def served() -> dict[str, int]:
    """How many times each tool of this server has run (the server's own count)."""
    return dict(SERVED)


def _catalogue_tool(name: str) -> Callable[[str], str]:
    def handler(query: str = "") -> str:
        SERVED[name] += 1
        return f"{name}: 0 records match {query!r}"

    return handler


def add_catalogue(target: MCPServer, count: int) -> None:
    """`count` more tools on `target`, named and described like a real catalogue (invoices, ...)."""
    subjects = ["invoice", "customer", "shipment", "ticket", "report", "calendar", "sample", "stock", "email", "file"]
    verbs = ["create", "list", "get", "update", "archive", "export", "count", "search", "tag", "close"]
    for i in range(count):
        subject, verb = subjects[i % len(subjects)], verbs[(i // len(subjects)) % len(verbs)]
        name = f"{verb}_{subject}_{i}"
        target.add_tool(_catalogue_tool(name), name=name, description=f"{verb.capitalize()} {subject} records ({i}).")


def serve_http(app_server: MCPServer, port: int = 0) -> None:
    """Serve streamable HTTP on 127.0.0.1:`port` (0: a free one). The socket is bound and listening
    before `listening on URL` is printed, so a client reading that line never races the start."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(app_server.streamable_http_app(host="127.0.0.1"), log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m loopwarden.examples.mcp_notes")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT (0: free)")
    parser.add_argument("--catalogue", type=int, default=0, metavar="N", help="add N generated tools")
    args = parser.parse_args()
    add_catalogue(server, args.catalogue)
    if args.http is None:
        server.run("stdio")
    else:
        serve_http(server, args.http)


if __name__ == "__main__":
    main()
