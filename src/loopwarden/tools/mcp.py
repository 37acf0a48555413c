"""The tools of an MCP server as loopwarden tools (the official `mcp` SDK, extra `mcp`).

    async with MCPTools.stdio(sys.executable, ["server.py"]) as server:
        agent = Agent(model, [server, my_tool])  # the server's tools; behind ToolSearch when many

Each listed tool keeps its JSON Schema (schema.py), is named `<namespace>.<tool>` (the
server's name unless given) and carries the guard's flags its annotations declare
(mcp_results.py). Every call gives a `ToolResult`: an `isError` result, an MCP error, a timeout
and a server that went away (its process exited: the SDK sees its stdout close) are failures the
model reads, never an exception or a hang.

The connection is held by one task on the event loop that opened it (the SDK's task groups must
be left by the task that entered them); calls from another loop, like `agent.run_sync` in a sync
`with` block, are handed to that loop. `with MCPTools...` (sync) opens it on a thread of its own.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, TextIO

from ..errors import ConfigError, LoopwardenError
from . import Tool, ToolLike, ToolResult, tool
from .mcp_results import (
    CONNECTION_CLOSED,
    annotation_flags,
    call_result,
    protocol_failure,
    server_gone,
    transport_failure,
)
from .schema import tool_from_schema
from .search import ToolSearch

MANY_TOOLS = 20
"""More tools than this, from an agent's MCP servers together, are offered behind `ToolSearch`:
a handful of schemas cost less than a search turn, hundreds cost more than the task."""
MAX_PAGES = 100
"""tools/list pages read at most: a server that paginates forever cannot hang the connection."""
TIMEOUT_GRACE_S = 5.0
"""The executor's own limit on a call is this much above the MCP read timeout, so the SDK's
timeout (which also tells the server to cancel) answers first."""
CLOSE_WITHIN_S = 15.0
"""How long closing waits for the SDK to leave its client (a stdio server gets 2 s to exit after
its stdin closes, then it is killed) before the connection's task is cancelled, and as long again
after that: a server that ignores both is abandoned, never waited for."""


class MCPConnectionError(LoopwardenError):
    """An MCP server could not be started, reached or listed."""


def namespace_of(name: str) -> str:
    """A server's name as a tool namespace: what OpenAI function names allow, no `__` inside."""
    cleaned = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_-]+", "_", name)).strip("_-")
    return cleaned or "mcp"


def _describe(error: BaseException) -> str:
    """The innermost cause of a failed start (the SDK raises exception groups from task groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


@dataclass
class MCPTools:
    """One connection to an MCP server and the loopwarden tools it offers (`tools`, after `open`).

    `namespace`: the tools' namespace (default: the name the server gives itself). `timeout`: seconds
    a call may take. `repeatable` / `terminal`: names of the server's tools that are polls (identical
    calls legitimate) or that finish the task. `approve_destructive`: tools declaring
    `destructiveHint` need approval (see mcp_results.py for the whole mapping)."""

    target: Any
    """What the SDK's `Client` connects to: `StdioServerParameters` or a streamable HTTP URL."""
    namespace: str | None = None
    timeout: float = 30.0
    connect_timeout: float = 60.0
    repeatable: Sequence[str] = ()
    terminal: Sequence[str] = ()
    approve_destructive: bool = True
    errlog: TextIO | None = None
    """Where a stdio server's stderr goes: this process's stderr by default, or nowhere when that
    is no real file (pytest's capture, a notebook: the SDK needs a file descriptor)."""
    tools: list[Tool] = field(default_factory=list, init=False)
    annotations: dict[str, Any] = field(default_factory=dict, init=False)
    """Each tool's `ToolAnnotations` as the server listed them (by the server's tool name)."""
    _client: Any = field(default=None, init=False, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    _stop: asyncio.Event | None = field(default=None, init=False, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _lost: str | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    @classmethod
    def stdio(
        cls, command: str, args: Sequence[str] = (), *, env: dict[str, str] | None = None, cwd: str | None = None,
        **options: Any,
    ) -> MCPTools:  # fmt: skip
        """A server started as a subprocess, spoken to over its stdin/stdout."""
        from mcp import StdioServerParameters

        return cls(StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd), **options)

    @classmethod
    def http(cls, url: str, **options: Any) -> MCPTools:
        """A server reached over streamable HTTP at `url` (e.g. `http://127.0.0.1:8000/mcp`)."""
        return cls(url, **options)

    @property
    def server_name(self) -> str:
        return self.namespace or "mcp"

    @property
    def connected(self) -> bool:
        return self._client is not None and self._lost is None

    def tool_search(self, many: int = MANY_TOOLS, **options: Any) -> ToolSearch | None:
        """A `ToolSearch` for an agent when this server lists more than `many` tools, else None
        (a handful of schemas cost less than a search turn)."""
        return ToolSearch(**options) if len(self.tools) > many else None

    # -- lifetime ------------------------------------------------------------------------------

    async def open(self) -> Self:
        """Start or reach the server, list its tools and build `tools`. Raises `MCPConnectionError`
        when it fails or has not answered within `connect_timeout` (the start is then cancelled:
        a server that never answers `initialize` costs `connect_timeout`, not the read timeout)."""
        if self._task is not None:
            raise MCPConnectionError("this MCPTools is already open")
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        ready: asyncio.Future[list[Any]] = self._loop.create_future()
        self._task = asyncio.create_task(self._hold(ready), name="loopwarden-mcp")
        try:
            listed = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except TimeoutError:
            ready.cancel()  # _hold reports nothing more through it
            self._lost = "did not start"
            await _finish(self._task, cancel_at_once=True)
            raise MCPConnectionError(f"MCP server did not answer within {self.connect_timeout:g} s") from None
        except BaseException:
            ready.cancel()
            await self.aclose()
            raise
        self.tools = [self._tool(spec) for spec in listed]
        return self

    async def aclose(self) -> None:
        """Close the connection; bounded (CLOSE_WITHIN_S): the SDK stops a stdio server's process."""
        task, stop = self._task, self._stop
        if task is None or stop is None:
            return
        self._lost = self._lost or "closed"
        stop.set()
        if asyncio.get_running_loop() is self._loop:
            await _finish(task)
        elif self._loop is not None and not self._loop.is_closed():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_finish(task), self._loop))

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    def __enter__(self) -> Self:
        """Sync entry: the connection lives on an event loop in a thread of its own."""
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="loopwarden-mcp", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.open(), loop).result()
        except BaseException:
            self._stop_thread(loop)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        loop = self._loop
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self.aclose(), loop).result()
            self._stop_thread(loop)

    def _stop_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join()
        loop.close()

    async def _hold(self, ready: asyncio.Future[list[Any]]) -> None:
        """The connection's own task: enters the SDK client, lists, waits for `aclose`, leaves."""
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        assert self._stop is not None
        target, devnull = self.target, None
        if isinstance(target, StdioServerParameters):
            errlog = self.errlog if self.errlog is not None else _usable(sys.stderr)
            if errlog is None:
                errlog = devnull = open(os.devnull, "w")  # noqa: SIM115 (closed below, after the client)
            target = stdio_client(target, errlog=errlog)
        try:
            async with Client(target, read_timeout_seconds=self.timeout) as client:
                listed = await _list_all(client)
                if self.namespace is None:
                    info = client.server_info
                    self.namespace = namespace_of(info.name if info is not None and info.name else "mcp")
                if ready.done():  # open() gave up waiting meanwhile
                    return
                self._client = client
                ready.set_result(listed)
                await self._stop.wait()
        except Exception as error:  # a failed start is raised by open(); a later one ends the calls
            if not ready.done():
                ready.set_exception(MCPConnectionError(f"MCP server failed to start: {_describe(error)}"))
                ready.exception()  # raised by open(); marked as read for when open() has stopped waiting
            self._lost = self._lost or _describe(error)
        finally:
            self._client = None
            self._lost = self._lost or "closed"
            if devnull is not None:
                devnull.close()

    # -- calls ---------------------------------------------------------------------------------

    def _tool(self, spec: Any) -> Tool:
        name = str(spec.name)
        self.annotations[name] = spec.annotations

        async def call(**arguments: Any) -> ToolResult:
            return await self.call(name, arguments)

        return tool_from_schema(
            name,
            dict(spec.input_schema or {}),
            call,
            description=spec.description or spec.title or name,
            namespace=self.namespace,
            terminal=name in self.terminal,
            repeatable=name in self.repeatable,
            result_parser=None,  # isError is MCP's failure signal, read in call()
            timeout=self.timeout + TIMEOUT_GRACE_S,
            **annotation_flags(spec.annotations, approve_destructive=self.approve_destructive),
        )

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call the server's tool `name`; every outcome is a `ToolResult`."""
        loop = self._loop
        if loop is None or self._client is None or self._lost is not None:
            return server_gone(self.server_name, self._lost or "not open")
        if asyncio.get_running_loop() is loop:
            return await self._call(name, arguments)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._call(name, arguments), loop))

    async def _call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        from mcp import MCPError

        client, qualified = self._client, f"{self.server_name}.{name}"
        if client is None or self._lost is not None:
            return server_gone(self.server_name, self._lost or "not open")
        try:
            result = await client.call_tool(name, arguments, read_timeout_seconds=self.timeout)
        except MCPError as error:
            if error.code == CONNECTION_CLOSED:
                self._lost = "the connection closed: the server process exited or the link broke"
                return server_gone(self.server_name, self._lost)
            return protocol_failure(error.code, error.message, qualified, self.server_name)
        except Exception as error:  # below MCP: HTTP refused or reset
            if self._task is not None and self._task.done():
                return server_gone(self.server_name, self._lost or _describe(error))
            return transport_failure(error, self.server_name)
        return call_result(result, qualified)


def _usable(stream: TextIO) -> TextIO | None:
    """`stream` when a child process can write to it (it has a file descriptor), else None."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return None
    return stream


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _finish(task: asyncio.Task[None], *, cancel_at_once: bool = False) -> None:
    """Wait for the connection's task to leave the SDK's client: a bounded wait, then a cancel
    and another bounded wait; a task that outlives both is left behind (it holds nothing we wait on)."""
    if not cancel_at_once:
        await asyncio.wait({task}, timeout=CLOSE_WITHIN_S)
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CLOSE_WITHIN_S)
    if task.done() and not task.cancelled():
        task.exception()  # _hold catches its errors; this only marks the outcome as read


def offer_servers(
    items: Iterable[ToolLike | MCPTools], search: ToolSearch | None, many: int = MANY_TOOLS
) -> tuple[list[ToolLike], ToolSearch | None]:
    """An agent's tools with each open `MCPTools` replaced by its tools, and the agent's tool
    search: its own when it has one, else a `ToolSearch` when the servers list more than `many`
    tools together; the agent's other tools then stay offered from the first turn (`always`)."""
    tools: list[ToolLike] = []
    own: list[str] = []
    listed = 0
    for item in items:
        if isinstance(item, MCPTools):
            if item._task is None:
                raise ConfigError(
                    f"MCP server {item.target!r} is not open: pass it open (`async with MCPTools...(...) as server:`)"
                )
            tools += item.tools
            listed += len(item.tools)
            continue
        declared = item if isinstance(item, Tool) else tool(item)
        tools.append(declared)
        own.append(declared.qualified_name)
    if search is None and listed > many:
        search = ToolSearch(always=tuple(own))
    return tools, search


def python_server(script: str, *args: str, **options: Any) -> MCPTools:
    """A stdio server written in Python, run by this interpreter (`sys.executable script args`)."""
    return MCPTools.stdio(sys.executable, [script, *args], **options)


__all__ = ["MCPConnectionError", "MCPTools", "namespace_of", "offer_servers", "python_server"]
