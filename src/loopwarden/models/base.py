"""The one small protocol between the runtime and any model: OpenAI chat format in,
text and/or tool calls plus usage out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ModelError
from ..hotpath.trusted import own_fields_set_first

Message = dict[str, Any]
"""One OpenAI chat message (`role`, `content`, `tool_calls`, `tool_call_id`, ...)."""

__all__ = [
    "ClientNote",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "ModelRequest",
    "ToolCall",
    "ToolChoice",
    "Usage",
]

ToolChoice = Literal["auto", "none", "required"] | dict[str, Any]


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


class ToolCall(BaseModel):
    """A call the model proposes. `arguments` is the raw JSON text, parsed by the runtime."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"


class ModelRequest(BaseModel):
    __setattr__ = own_fields_set_first  # built in order each step: they share a fields-set (hotpath/trusted.py)

    messages: list[Message]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    max_tokens: int | None = None
    """The most output this call may write (a stage's cap); None = the endpoint's default."""
    on_text: Callable[[str], None] | None = Field(default=None, exclude=True, repr=False)
    """Set when the caller streams text (`Agent.stream_text`): a model that can stream calls it
    with each piece of reply text as it arrives, and still returns the whole reply. Models
    that cannot stream ignore it. Not part of the request sent or recorded."""


class ClientNote(BaseModel):
    """Something a model client handled on its own within one call: a retry after a 429, 5xx or
    timeout, tool-call markup recovered from the text, an empty reply asked for again."""

    kind: str
    message: str
    status: int | None = None
    delay: float = 0.0


class ModelReply(BaseModel):
    __setattr__ = own_fields_set_first  # as ModelRequest

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    reasoning: str | None = None
    finish_reason: str | None = None
    model: str | None = None
    notes: list[ClientNote] = Field(default_factory=list)
    attempts: int = 1
    """HTTP requests that reached the server for this reply, failed ones included (each is a
    model call in the totals; `usage` covers them all)."""

    def assistant_message(self) -> Message:
        """The assistant message to append to the history, in OpenAI format."""
        fields = self.__dict__  # read once (each attribute of a pydantic instance goes through its `__getattr__` hook)
        message: Message = {"role": "assistant", "content": fields["text"]}
        if calls := fields["tool_calls"]:
            wire = []  # a loop, not a comprehension: no function object and frame of its own a reply
            for call in calls:
                c = call.__dict__
                function = {"name": c["name"], "arguments": c["arguments"]}
                wire.append({"id": c["id"], "type": "function", "function": function})
            message["tool_calls"] = wire
        if fields["reasoning"] is not None:
            message["reasoning_content"] = fields["reasoning"]
        return message


@runtime_checkable
class Model(Protocol):
    """Anything that can answer a chat request. `name` is recorded in events and prices."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelReply: ...
