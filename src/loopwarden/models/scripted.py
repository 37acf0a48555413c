"""Deterministic models for tests and examples: the only stand-ins for an LLM."""

from __future__ import annotations

import inspect
import json
import re
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from itertools import count
from typing import Any

from ..hotpath.trusted import in_order, trusted
from .base import ModelError, ModelReply, ModelRequest, ToolCall, Usage

ReplyLike = ModelReply | str | ToolCall | list[ToolCall] | Exception

_call_ids = count(1)


def call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None) -> ToolCall:
    """A tool call for a script; arguments as a dict (serialised) or raw text (kept as is)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=id or f"call_{next(_call_ids)}", name=name, arguments=raw)


def _scripted_usage() -> Usage:
    """What a scripted reply says it used, unless its model was given a usage: one per model,
    shared by its replies (as a given one is)."""
    return trusted(Usage, {"prompt_tokens": 10, "completion_tokens": 5})


_TEXT_UNSET = ("tool_calls", "reasoning", "model", "notes", "attempts")
_CALLS_UNSET = ("text", "reasoning", "model", "notes", "attempts")


def as_reply(item: ReplyLike, usage: Usage | None = None) -> ModelReply:
    # The common scripted reply first (see _READY); the kinds are disjoint, so the order is free.
    if isinstance(item, ToolCall):  # every field in field order; the defaults not counted as set
        calls = {"text": None, "tool_calls": [_fresh_id(item)], "usage": usage or _scripted_usage(), "reasoning": None,
                 "finish_reason": "tool_calls", "model": None, "notes": [], "attempts": 1}  # fmt: skip
        return in_order(ModelReply, calls, _CALLS_UNSET)
    if isinstance(item, str):
        text = {"text": item, "tool_calls": [], "usage": usage or _scripted_usage(), "reasoning": None,
                "finish_reason": "stop", "model": None, "notes": [], "attempts": 1}  # fmt: skip
        return in_order(ModelReply, text, _TEXT_UNSET)
    if isinstance(item, ModelReply):
        return item
    if isinstance(item, list):
        usage = usage or _scripted_usage()
        return ModelReply(tool_calls=[_fresh_id(c) for c in item], usage=usage, finish_reason="tool_calls")
    raise TypeError(f"cannot turn {type(item).__name__} into a model reply")


def streamed(reply: ModelReply, request: ModelRequest) -> ModelReply:
    """Tell a streaming caller the reply text word by word, as a real client would in chunks."""
    if request.on_text is not None and reply.text:
        for piece in re.findall(r"\S+\s*|\s+", reply.text):
            request.on_text(piece)
    return reply


def _fresh_id(tool_call: ToolCall) -> ToolCall:
    # A script may reuse one ToolCall object many times; each proposal needs its own id.
    fresh = f"call_{next(_call_ids)}"
    if type(tool_call) is not ToolCall:
        return tool_call.model_copy(update={"id": fresh})
    c = tool_call.__dict__  # read once (a pydantic instance's attributes go through its `__getattr__` hook)
    return in_order(ToolCall, {"id": fresh, "name": c["name"], "arguments": c["arguments"]})


class ScriptedModel:
    """Answers from a queue of replies and records every request it received."""

    def __init__(self, replies: Iterable[ReplyLike], *, name: str = "scripted", usage: Usage | None = None):
        self.name = name
        self._replies: deque[ReplyLike] = deque(replies)
        self._usage = usage or _scripted_usage()
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if not self._replies:
            raise ModelError("script_exhausted", "ScriptedModel has no replies left")
        item = self._replies.popleft()
        if isinstance(item, Exception):
            raise item
        return streamed(as_reply(item, self._usage), request)

    @property
    def calls(self) -> int:
        return len(self.requests)


ReplyFunction = Callable[[ModelRequest], ReplyLike | Awaitable[ReplyLike]]


class FunctionModel:
    """A function of the request decides the reply (sync or async). Every request is kept in
    `requests` unless `keep_requests=False` (then only counted: a long run's requests each hold
    a copy of the history)."""

    def __init__(
        self, function: ReplyFunction, *, name: str = "function", usage: Usage | None = None, keep_requests: bool = True
    ):
        self.name = name
        self._function = function
        self._usage = usage or _scripted_usage()
        self._keep = keep_requests
        self._calls = 0
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        self._calls += 1
        if self._keep:
            self.requests.append(request)
        item = self._function(request)
        if type(item) not in _READY:  # a reply of these exact types is neither awaitable nor an exception
            if not isinstance(item, _READY) and inspect.isawaitable(item):
                item = await item
            if isinstance(item, Exception):
                raise item
        return streamed(as_reply(item, self._usage), request)  # type: ignore[arg-type]  # not awaitable: as above

    @property
    def calls(self) -> int:
        return self._calls


_READY = (str, ToolCall, ModelReply, list)
"""Replies a function returns as they are (anything else may be awaitable). Their exact types are
checked first: an `isinstance` that fails on a pydantic instance reads its `__class__` through
pydantic's attribute hook."""


def offered_tool_names(request: ModelRequest) -> list[str]:
    return [t["function"]["name"] for t in request.tools]
