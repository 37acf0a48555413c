"""Reading one chat-completions request as a conversation: which task is current (the messages
since the last user message), the assistant turns of that task, and the results the client sent
back for each tool call."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..models.base import Message, ModelReply, ToolCall, Usage

CONVERSATION_HEADER = "x-loopwarden-conversation"
"""A client may name its conversation; otherwise it is identified by its opening messages."""


class BadRequest(ValueError):
    """The request is not a chat-completions request this proxy can read; `param` names the field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass
class ClientResult:
    call_id: str
    tool: str
    arguments: str
    content: str
    used: bool = False


@dataclass
class Conversation:
    """One request's messages split into the opening (everything up to and including the last user
    message: the prompt of the current task) and the task's assistant turns and tool results."""

    id: str
    opening: list[Message]
    task: list[Message]
    replies: list[ModelReply]
    results: list[list[ClientResult]] = field(default_factory=list)
    """Per assistant turn (same index as `replies`): the results the client sent for its calls."""

    def take_result(self, turn: int, tool: str, arguments: dict[str, Any]) -> str | None:
        """The client's result for the first not yet used call of `tool` in assistant turn `turn`
        with these arguments (or, failing an exact match, the first unused call of that tool in
        that turn). Only the turn's own results: a result of a call the guard held back in an
        earlier turn never answers a later call."""
        wanted = _canonical(arguments)
        turn_results = self.results[turn] if 0 <= turn < len(self.results) else []
        for exact in (True, False):
            for result in turn_results:
                if result.used or result.tool != tool:
                    continue
                if exact and _canonical(_loads(result.arguments)) != wanted:
                    continue
                result.used = True
                return result.content
        return None


def read_conversation(body: dict[str, Any], header_id: str | None = None) -> Conversation:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'", f"messages[{i}]")
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    opening, task = messages[: last_user + 1], messages[last_user + 1 :]
    replies: list[ModelReply] = []
    results: list[list[ClientResult]] = []
    calls: dict[str, ToolCall] = {}
    for i, message in enumerate(task):
        if message["role"] == "assistant":
            reply = reply_from_message(message, f"messages[{last_user + 1 + i}]")
            replies.append(reply)
            results.append([])
            calls = {c.id: c for c in reply.tool_calls}  # a result answers a call of the turn before it
        elif message["role"] == "tool":
            call = calls.get(str(message.get("tool_call_id")))
            if call is not None:
                content = content_text(message.get("content"))
                results[-1].append(ClientResult(call.id, call.name, call.arguments, content))
    return Conversation(header_id or conversation_id(messages), opening, task, replies, results)


def reply_from_message(message: Message, where: str = "message") -> ModelReply:
    calls = []
    for j, raw in enumerate(message.get("tool_calls") or []):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequest(f"{where}.tool_calls[{j}] needs a function name", f"{where}.tool_calls[{j}]")
        arguments = function.get("arguments")
        raw_arguments = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        calls.append(ToolCall(id=str(raw.get("id") or f"{where}-{j}"), name=function["name"], arguments=raw_arguments))
    text = content_text(message.get("content")) or None
    return ModelReply(text=text, tool_calls=calls, usage=Usage(), finish_reason="tool_calls" if calls else "stop")


def content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return json.dumps(content, ensure_ascii=False)


def conversation_id(messages: list[Message]) -> str:
    """The conversation a request belongs to: a hash of its messages up to the first user message
    (the system prompt and the first request stay the same for the life of a conversation)."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
    head = json.dumps(messages[: first_user + 1], sort_keys=True, ensure_ascii=False, default=str)
    return "conv-" + hashlib.sha256(head.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
