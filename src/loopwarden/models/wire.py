"""The Chat Completions wire format, without the SDK: messages out, replies and stream chunks
in (as plain dicts), so the rules below can be tested on their own.

Reasoning: providers return a model's chain of thought beside the answer (`reasoning_content`
on DeepSeek, `reasoning` on vLLM/OpenRouter, `<think>` blocks inside `content` on many local
servers). It is kept in `ModelReply.reasoning`, never in `text`, so it never reaches a report.
What goes back to the provider follows DeepSeek's thinking-mode rules: the reasoning of an
assistant turn that made tool calls must be sent back in every later request (else HTTP 400);
the reasoning of a turn without tool calls is not sent (it is ignored at best, and the older
`deepseek-reasoner` rejected it with HTTP 400). Other providers get no reasoning at all.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from .base import Message, ModelReply, ToolCall, Usage
from .markup import LeakedMarkup, find_leaked_calls

_THINK = re.compile(r"^\s*<think>(?P<reasoning>.*?)(?:</think>|\Z)\s*", re.DOTALL)


def to_wire_messages(
    messages: list[Message], *, echo_reasoning: bool, tool_call_content: str = "empty"
) -> list[Message]:
    """`tool_call_content`: how an assistant turn with no text carries it — `empty` (""),
    `omit` (no key) or `null`; strict servers reject null (llama-cpp-python: HTTP 500)."""
    return [_wire_message(m, echo_reasoning, tool_call_content) for m in messages]


def _wire_message(message: Message, echo_reasoning: bool, tool_call_content: str = "empty") -> Message:
    if message.get("role") != "assistant":
        return message
    wire = {k: v for k, v in message.items() if k not in ("reasoning_content", "reasoning")}
    if not wire.get("content"):
        wire.pop("content", None)
        if tool_call_content == "null":
            wire["content"] = None
        elif tool_call_content == "empty" or not message.get("tool_calls"):
            wire["content"] = ""  # a turn with neither text nor calls still needs its content
    if message.get("tool_calls"):
        wire["tool_calls"] = [_wire_tool_call(c) for c in message["tool_calls"]]
        if echo_reasoning:
            # Present even when empty: in thinking mode DeepSeek rejects a tool-call turn
            # without the field (a turn that came from markup recovery has no reasoning).
            wire["reasoning_content"] = message.get("reasoning_content") or ""
    return wire


def _wire_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    # A model's malformed arguments stay in our history as the model wrote them, but many
    # servers parse the history's arguments (chat templates call json.loads) and would turn the
    # next request into an HTTP 400/500. Send them as a JSON object that still shows the text.
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    try:
        json.loads(arguments)
    except (json.JSONDecodeError, TypeError, RecursionError):
        arguments = json.dumps({"_unparsed_arguments": str(arguments)[:4000]})
    return {**call, "function": {**function, "arguments": arguments}}


def new_call_id() -> str:
    """An id for a call the server sent without one (ids must be unique within a history)."""
    return f"call_{uuid.uuid4().hex[:16]}"


def usage_from(data: dict[str, Any] | None) -> Usage:
    """Token usage; cached prompt tokens as DeepSeek (`prompt_cache_hit_tokens`) or OpenAI
    (`prompt_tokens_details.cached_tokens`) report them."""
    if not data:
        return Usage()
    details = data.get("prompt_tokens_details") or {}
    cached = data.get("prompt_cache_hit_tokens")
    if cached is None:
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        cached_tokens=int(cached or 0),
    )


def split_reasoning(text: str | None, reasoning: str | None) -> tuple[str | None, str | None]:
    """Move a leading `<think>...</think>` block out of the text into the reasoning."""
    if not text:
        return text, reasoning
    match = _THINK.match(text)
    if match is None:
        return text, reasoning
    inline = match["reasoning"].strip()
    rest = text[match.end() :] or None
    return rest, "\n".join(part for part in (reasoning, inline) if part) or None


def parse_completion(data: dict[str, Any], *, fallback_model: str) -> ModelReply:
    """A non-streamed `chat.completion` object (as a dict) as a ModelReply."""
    choices = data.get("choices") or []
    choice = choices[0] if choices else {}
    message = choice.get("message") or {}
    calls = [
        ToolCall(
            id=c.get("id") or new_call_id(),
            name=(c.get("function") or {}).get("name") or "",
            arguments=(c.get("function") or {}).get("arguments") or "{}",
        )
        for c in message.get("tool_calls") or []
    ]
    text, reasoning = split_reasoning(
        message.get("content"), message.get("reasoning_content") or message.get("reasoning")
    )
    return ModelReply(
        text=text,
        tool_calls=calls,
        usage=usage_from(data.get("usage")),
        reasoning=reasoning,
        finish_reason=choice.get("finish_reason"),
        model=data.get("model") or fallback_model,
    )


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class StreamAssembler:
    """Builds one reply from `chat.completion.chunk` dicts: text and reasoning deltas are
    concatenated; tool-call deltas are joined by `index` (id and name arrive once, arguments
    in pieces). Some servers send each call whole under index 0; a new id starts a new call."""

    fallback_model: str
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[_PartialCall] = field(default_factory=list)
    slots: dict[int, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None
    chunks: int = 0

    def add(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        self.model = self.model or chunk.get("model")
        if chunk.get("usage"):
            self.usage = usage_from(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if thought:
                self.reasoning.append(thought)
            for piece in delta.get("tool_calls") or []:
                self._add_call_delta(piece)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def _add_call_delta(self, piece: dict[str, Any]) -> None:
        index = int(piece.get("index") or 0)
        function = piece.get("function") or {}
        slot = self.slots.get(index)
        new_id = piece.get("id")
        if slot is None or (new_id and self.calls[slot].id and new_id != self.calls[slot].id):
            self.calls.append(_PartialCall())
            slot = self.slots[index] = len(self.calls) - 1
        partial = self.calls[slot]
        partial.id = partial.id or new_id or ""
        partial.name += function.get("name") or ""
        partial.arguments += function.get("arguments") or ""

    def reply(self) -> ModelReply:
        text, reasoning = split_reasoning("".join(self.text) or None, "".join(self.reasoning) or None)
        return ModelReply(
            text=text,
            tool_calls=[
                ToolCall(id=c.id or new_call_id(), name=c.name, arguments=c.arguments or "{}") for c in self.calls
            ],
            usage=self.usage,
            reasoning=reasoning,
            finish_reason=self.finish_reason,
            model=self.model or self.fallback_model,
        )


def recover_leaked_calls(reply: ModelReply) -> tuple[ModelReply, LeakedMarkup | None]:
    """Tool-call markup in the text becomes real tool calls (when it can be read) and leaves
    the text; returns the markup found so the caller can report it."""
    leaked = find_leaked_calls(reply.text)
    if leaked is None:
        return reply, None
    recovered = [ToolCall(id=new_call_id(), name=c.name, arguments=c.arguments) for c in leaked.calls]
    update: dict[str, Any] = {"text": leaked.text}
    if recovered and not reply.tool_calls:
        update |= {"tool_calls": recovered, "finish_reason": "tool_calls"}
    return reply.model_copy(update=update), leaked


def is_empty(reply: ModelReply) -> bool:
    return not (reply.text and reply.text.strip()) and not reply.tool_calls
