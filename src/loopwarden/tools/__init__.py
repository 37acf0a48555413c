"""Declaring tools: a typed Python function becomes a tool with a JSON Schema, and every
outcome of running it becomes a `ToolResult` the model can read."""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import resource
import time
import types
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict

from ..context import context_now
from ..errors import ToolDefinitionError
from ..hotpath.frozen import quick_init
from ..hotpath.trusted import in_order
from .results import (
    ResultParser,
    ToolResult,
    business_failure,
    failure_parsers,
    http_status_failure,
    status_failure,
)
from .signatures import args_model as signature_model
from .signatures import arguments_schema, parse_docstring

__all__ = [
    "ArgumentsAsGiven",
    "ResultParser",
    "SideEffect",
    "Tool",
    "ToolLike",
    "ToolPace",
    "ToolRegistry",
    "ToolResult",
    "business_failure",
    "failure_parsers",
    "http_status_failure",
    "status_failure",
    "tool",
]

SideEffect = Literal["read", "write"]

# OpenAI function names allow [a-zA-Z0-9_-]; a namespace separator '.' is sent as '__'.
WIRE_NAMESPACE_SEP = "__"


class ArgumentsAsGiven(BaseModel):
    """The arguments of a tool declared by a JSON Schema (tools/schema.py), kept as the one JSON
    object the model sent, in `arguments`. The guard fingerprints, compares (detectors) and reports
    (events, approvals) that object itself, as it does a typed tool's fields."""

    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any]


RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)  # Linux
INLINE_LIMIT_S = 0.005
"""A sync tool whose calls return within this runs on the event loop, not in a worker thread."""
INLINE_AFTER = 3
"""Calls a sync tool of undeclared pace makes in a worker thread before it may run inline."""


MAX_PACES_KEPT = 1024
_paces: dict[tuple[Any, str], ToolPace] = {}


def pace_of(fn: Callable[..., Any], name: str) -> ToolPace:
    """The pace shared by the tools declared from this function's code under this name (a
    wrapper whose code serves many functions, `functools.wraps` style, gets a pace of its own)."""
    if type(fn) is not types.FunctionType or hasattr(fn, "__wrapped__"):
        return ToolPace()
    key = (fn.__code__, name)
    found = _paces.get(key)
    if found is None:
        if len(_paces) >= MAX_PACES_KEPT:
            _paces.clear()
        found = _paces[key] = ToolPace()
    return found


def _waits_so_far() -> int:
    """Times this thread has given up the CPU to wait (sleep, I/O, a lock): what tells a call that
    blocked from one the machine's load preempted (that is an involuntary switch). -1 where unknown."""
    return resource.getrusage(RUSAGE_THREAD).ru_nvcsw if RUSAGE_THREAD is not None else -1


@dataclass
class ToolPace:
    """How an undeclared sync tool's calls went: it runs inline (no thread hop) once its first
    `INLINE_AFTER` calls returned within `INLINE_LIMIT_S`, and goes back to a worker thread for
    good (where the timeout holds) once a call took longer because it waited. A call slowed down
    only by a busy machine does not count (where the platform tells the two apart).

    Tools declared with `tool()` from one function under one name share their pace (`pace_of`):
    a tool declared afresh for each run (a closure over the run's data) keeps what earlier runs
    learned instead of paying its first calls' thread hops again."""

    calls: int = 0
    blocks: bool = False

    def note(self, seconds: float, waited: bool = True) -> None:
        self.calls += 1
        if seconds > INLINE_LIMIT_S and waited:
            self.blocks = True


@quick_init  # declared per run by code that makes its tools per request
@dataclass(frozen=True)
class Tool:
    """A callable the model may propose, with the flags the runtime needs to guard it."""

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    namespace: str | None = None
    terminal: bool = False
    repeatable: bool = False
    side_effect: SideEffect = "read"
    idempotent: bool = False
    """A write that is safe to repeat (setting a value, an upsert by key): the executor retries it
    after a timeout or connection error, as it does reads. A write that is not idempotent is run
    once; its retryable failure goes to the model saying it was not retried (it may have done its work)."""
    result_parser: ResultParser | None = business_failure
    timeout: float | None = None
    roles: frozenset[str] | None = None
    requires_approval: bool = False
    is_async: bool = field(default=False)
    blocking: bool | None = None
    """Sync tools only. True: every call runs in a worker thread, so its timeout holds. False:
    calls run on the event loop (a quick function that never waits on I/O). None: detected
    (ToolPace); a sync tool with its own `timeout` counts as blocking."""
    pace: ToolPace = field(default_factory=ToolPace, init=False, compare=False, repr=False)
    context_arg: str | None = None
    """The parameter annotated `RunContext[...]`, filled by the runtime and absent from the schema."""
    rerun_on_recovery: bool = False
    """Durable runs (durable/steps.py): True for a tool whose effect is state in the process that
    later code reads (what has been read, a record being built): a recovered run runs it again
    instead of replaying its recorded result. It must be safe to run twice; a model call it makes
    is still a step, never paid twice."""

    @cached_property
    def qualified_name(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name

    @cached_property
    def wire_name(self) -> str:
        return self.qualified_name.replace(".", WIRE_NAMESPACE_SEP)

    @property
    def parameters(self) -> dict[str, Any]:
        """The arguments' JSON Schema, from the argument model (a subclass may give its own)."""
        return copy.deepcopy(arguments_schema(self.args_model))

    @cached_property
    def _wire_schema(self) -> dict[str, Any]:
        own = type(self).parameters is not Tool.parameters  # a subclass's own schema
        parameters = self.parameters if own else arguments_schema(self.args_model)  # shared, read-only
        return {
            "type": "function",
            "function": {"name": self.wire_name, "description": self.description, "parameters": parameters},
        }

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI tool entry. Computed once per tool and shared: treat it as read-only."""
        return self._wire_schema

    @property
    def retried_automatically(self) -> bool:
        """Whether the executor retries a retryable failure: reads and idempotent writes."""
        return self.side_effect != "write" or self.idempotent

    @property
    def runs_inline(self) -> bool:
        """Whether a call runs on the event loop: a sync tool declared or found quick."""
        if self.is_async or self.blocking:
            return False
        if self.blocking is False:
            return True
        return self.timeout is None and self.pace.calls >= INLINE_AFTER and not self.pace.blocks

    async def call(self, arguments: BaseModel) -> Any:
        """Run the function with validated arguments: async functions awaited, quick sync ones
        inline (`runs_inline`), other sync ones in a worker thread."""
        if self.is_async:
            return await self.fn(**self._kwargs(arguments))
        if self.runs_inline:
            return self.call_inline(arguments)
        return await asyncio.to_thread(self._timed, self._kwargs(arguments))

    def call_inline(self, arguments: BaseModel) -> Any:
        """Run a sync tool on the calling thread (no timeout can interrupt it), timing it."""
        return self._timed(self._kwargs(arguments))

    def _kwargs(self, arguments: BaseModel) -> dict[str, Any]:
        """The function's keyword arguments: the validated fields (pydantic keeps exactly those in
        `__dict__`; passed on with `**`, never changed), and the run context if it takes one."""
        if self.context_arg is not None:
            return {**arguments.__dict__, self.context_arg: context_now()}
        return arguments.__dict__

    def _timed(self, kwargs: dict[str, Any]) -> Any:
        if self.blocking is not None:
            return self.fn(**kwargs)
        began, waits = time.perf_counter(), _waits_so_far()
        try:
            return self.fn(**kwargs)
        finally:
            seconds = time.perf_counter() - began  # whether a quick call waited does not matter: not asked
            self.pace.note(seconds, waited=seconds > INLINE_LIMIT_S and (waits < 0 or _waits_so_far() > waits))

    def to_result(self, raw: Any) -> ToolResult:
        if type(raw) not in _PLAIN_DATA and isinstance(raw, ToolResult):  # (a failed isinstance with a pydantic
            return raw  # class costs ~1,000 instructions; a value of these exact types never is one)
        if self.result_parser is not None:
            failure = self.result_parser(raw)
            if failure is not None:
                return failure
        # ToolResult.success(raw), built unchecked: every field in field order, the defaults not counted as set
        success = {"ok": True, "data": raw, "error_type": None, "retryable": False,
                   "user_action": None, "message": None}  # fmt: skip
        return in_order(ToolResult, success, _SUCCESS_UNSET)


_SUCCESS_UNSET = ("error_type", "retryable", "user_action", "message")
_PLAIN_DATA = frozenset({str, dict, list, int, float, bool, type(None)})


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    namespace: str | None = None,
    description: str | None = None,
    terminal: bool = False,
    repeatable: bool = False,
    side_effect: SideEffect = "read",
    idempotent: bool = False,
    result_parser: ResultParser | None = business_failure,
    timeout: float | None = None,
    roles: Iterable[str] | None = None,
    requires_approval: bool = False,
    blocking: bool | None = None,
    rerun_on_recovery: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    namespace: str | None = None,
    description: str | None = None,
    terminal: bool = False,
    repeatable: bool = False,
    side_effect: SideEffect = "read",
    idempotent: bool = False,
    result_parser: ResultParser | None = business_failure,
    timeout: float | None = None,
    roles: Iterable[str] | None = None,
    requires_approval: bool = False,
    blocking: bool | None = None,
    rerun_on_recovery: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool from a typed function (sync or async); usable bare or with options.
    `blocking=True` for a sync function that may wait (I/O, subprocesses, big files): it then
    always runs in a worker thread where its timeout holds (see Tool.blocking)."""
    options = (name, namespace, description, terminal, repeatable, side_effect, idempotent, result_parser,
               timeout, roles, requires_approval, blocking, rerun_on_recovery)  # fmt: skip
    # Bare, the tool is declared here: a nested `build` closing over the options would make a cell
    # for each of them on every call (code that declares its tools per run pays that per run).
    return _declare(fn, options) if fn is not None else functools.partial(_declare, options=options)


def _declare(func: Callable[..., Any], options: tuple[Any, ...]) -> Tool:
    """The tool `tool(**options)` declares from `func` (the options in `tool`'s order)."""
    (name, namespace, description, terminal, repeatable, side_effect, idempotent, result_parser,
     timeout, roles, requires_approval, blocking, rerun_on_recovery) = options  # fmt: skip
    tool_name = name or func.__name__
    doc_description, arg_help = parse_docstring(func.__doc__)
    args_model, context_arg = signature_model(func, tool_name, arg_help)
    declared = Tool(  # by position, in field order: 17 keywords matched by name cost about 8,000 instructions
        tool_name, description or doc_description or tool_name, func, args_model, namespace, terminal, repeatable,
        side_effect, idempotent, result_parser, timeout, frozenset(roles) if roles is not None else None,
        requires_approval, inspect.iscoroutinefunction(func), blocking, context_arg, rerun_on_recovery,
    )  # fmt: skip
    if not declared.is_async:
        object.__setattr__(declared, "pace", pace_of(func, tool_name))  # frozen: set once, here
    return declared


MAX_OFFERS_KEPT = 256

ToolLike = Tool | Callable[..., Any] | Callable[..., Awaitable[Any]]


class ToolRegistry:
    """The tools a run may know about, looked up by qualified or wire name."""

    def __init__(self, tools: Iterable[ToolLike] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._wire: dict[str, Tool] = {}  # wire name -> tool: a name may hold `__` itself (MCP tools do)
        self._offers: dict[tuple[str, ...] | None, list[dict[str, Any]]] = {}
        for item in tools:
            self.add(item)

    def add(self, item: ToolLike) -> Tool:
        declared = item if isinstance(item, Tool) else tool(item)
        if declared.qualified_name in self._tools:
            raise ToolDefinitionError(f"tool {declared.qualified_name!r} is already registered")
        clash = self._wire.get(declared.wire_name)
        if clash is not None:
            raise ToolDefinitionError(
                f"tools {clash.qualified_name!r} and {declared.qualified_name!r} have one wire name,"
                f" {declared.wire_name!r}: rename one or give it another namespace"
            )
        self._tools[declared.qualified_name] = declared
        self._wire[declared.wire_name] = declared
        self._offers.clear()
        return declared

    def get(self, name: str) -> Tool | None:
        """By qualified name (`ns.name`) or wire name (`ns__name`), whatever the names hold."""
        return self._tools.get(name) or self._wire.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def openai_tools(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The OpenAI-style `tools=[...]` list, for all tools or the named subset in order; built
        once per offered set (a new list each call, its entries shared: treat them as read-only)."""
        key = None if names is None else tuple(names)
        offer = self._offers.get(key)
        if offer is None:
            if len(self._offers) >= MAX_OFFERS_KEPT:  # tool search can offer many sets: keep the cache bounded
                self._offers.clear()
            chosen = self._tools.values() if key is None else (t for n in key if (t := self.get(n)) is not None)
            offer = self._offers[key] = [t.openai_schema() for t in chosen]
        return list(offer)
