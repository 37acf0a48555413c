"""LangChain helpers for tests/test_adapters_langchain.py: a scripted chat model, tools, the
agent's invocation. A module of its own, imported by that file's `lc` fixture: LangChain's import
cost ~4.4 s of CPU in every xdist worker's collection, also on the worker that runs none of it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool

import helpers
from loopwarden.adapters.langchain import LoopwardenMiddleware


@dataclass
class Seen:
    tools: list[str]
    choice: Any
    messages: list[BaseMessage]


@dataclass
class Script:
    """What the model does: (call index, tools offered, tool_choice) -> a tool call or text."""

    decide: Callable[[int, list[str], Any], tuple[str, dict[str, Any]] | str]
    seen: list[Seen] = field(default_factory=list)


class ScriptedChat(BaseChatModel):
    script: Any

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(offered=[t.name for t in tools], choice=kwargs.get("tool_choice"))

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        script: Script = self.script
        offered, choice = kw.get("offered") or [], kw.get("choice")
        script.seen.append(Seen(offered, choice, list(messages)))
        decision = script.decide(len(script.seen), offered, choice)
        if isinstance(decision, str):
            message = AIMessage(content=decision)
        else:
            name, args = decision
            message = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{len(script.seen)}"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


class Files(helpers.Files):
    def tools(self) -> list[StructuredTool]:
        read_file, finish = self.functions()
        return [StructuredTool.from_function(read_file), StructuredTool.from_function(finish, return_direct=True)]


def invoke(agent: Any, prompt: str, mode: str) -> dict[str, Any]:
    payload = {"messages": [("user", prompt)]}
    if mode == "sync":
        return agent.invoke(payload)  # type: ignore[no-any-return]
    return asyncio.run(agent.ainvoke(payload))  # type: ignore[no-any-return]


def stuck(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
    return ("read_file", {"path": "a.txt"})


__all__ = ["AIMessage", "Files", "HumanMessage", "LoopwardenMiddleware", "Script", "ScriptedChat", "ToolMessage",
           "create_agent", "invoke", "stuck"]  # fmt: skip
