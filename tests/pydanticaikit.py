"""PydanticAI helpers for tests/test_adapters_pydantic_ai.py: a scripted `FunctionModel` driven by a
decision function, tools, a run. A module of its own, imported by that file's `pai` fixture:
PydanticAI's import cost ~1.3 s of CPU in every xdist worker's collection, also on the worker that
runs none of it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

import helpers
from loopwarden.adapters.pydantic_ai import GuardStopped, Loopwarden

Decide = Callable[[int, list[str], Any], "tuple[str, dict[str, Any]] | str"]


@dataclass
class Seen:
    tools: list[str]
    choice: Any
    messages: list[ModelMessage]


@dataclass
class Script:
    """What the model does: (call index, tools offered, tool_choice) -> a tool call or text."""

    decide: Decide
    seen: list[Seen] = field(default_factory=list)

    def model(self) -> FunctionModel:
        return FunctionModel(self.respond)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered = [t.name for t in info.function_tools]
        choice = (info.model_settings or {}).get("tool_choice")
        self.seen.append(Seen(offered, choice, list(messages)))
        decision = self.decide(len(self.seen), offered, choice)
        if isinstance(decision, str):
            return ModelResponse(parts=[TextPart(decision)])
        name, args = decision
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{len(self.seen)}")])


class Files(helpers.Files):
    def tools(self) -> list[Callable[..., str]]:
        return list(self.functions())


def run(agent: Agent[Any, Any], prompt: str, mode: str, **kw: Any) -> Any:
    if mode == "sync":
        return agent.run_sync(prompt, **kw)
    return asyncio.run(agent.run(prompt, **kw))


def user_texts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def tool_returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]


def stuck(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
    return ("read_file", {"path": "a.txt"})


__all__ = [
    "Agent",
    "AgentInfo",
    "Decide",
    "Files",
    "FunctionModel",
    "GuardStopped",
    "Loopwarden",
    "ModelMessage",
    "ModelRequest",
    "ModelResponse",
    "Script",
    "Seen",
    "TextPart",
    "ToolCallPart",
    "ToolReturnPart",
    "UsageLimitExceeded",
    "UsageLimits",
    "UserPromptPart",
    "run",
    "stuck",
    "tool_returns",
    "user_texts",
]
