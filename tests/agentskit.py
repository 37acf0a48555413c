"""OpenAI Agents SDK helpers for tests/test_adapters_openai_agents.py: the SDK's scripted model
driven by a decision function, tools, a run. A module of its own, imported by that file's `sdk`
fixture: the SDK's import cost ~5 s of CPU in every xdist worker's collection, also on the worker
that runs none of it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, MaxTurnsExceeded, Runner, RunResult, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

import helpers
from loopwarden.adapters.openai_agents import GuardStopped, LoopwardenGuard

set_tracing_disabled(True)

Decide = Callable[[int, list[str], Any], "tuple[str, dict[str, Any]] | str"]


@dataclass
class Seen:
    tools: list[str]
    choice: Any
    input: list[Any]


@dataclass
class Script:
    """What the model does: (call index, tools offered, tool_choice) -> a tool call or text."""

    decide: Decide
    seen: list[Seen] = field(default_factory=list)

    def model(self) -> ScriptedModel:
        return ScriptedModel([ModelStep.respond(self.respond) for _ in range(400)])

    def respond(self, call: ModelCall) -> Any:
        items = [call.input] if isinstance(call.input, str) else list(call.input)
        offered = [t.name for t in call.tools]
        self.seen.append(Seen(offered, call.model_settings.tool_choice, items))
        decision = self.decide(len(self.seen), offered, call.model_settings.tool_choice)
        if isinstance(decision, str):
            return [assistant_message(decision)]
        name, args = decision
        return [function_call(name, args, call_id=f"c{len(self.seen)}")]


class Files(helpers.Files):
    def tools(self) -> list[Any]:
        return [function_tool(function) for function in self.functions()]


def run(agent: Agent[Any], prompt: str, mode: str) -> RunResult:
    if mode == "sync":
        return Runner.run_sync(agent, prompt, max_turns=30)
    return asyncio.run(Runner.run(agent, prompt, max_turns=30))


def user_texts(items: list[Any]) -> list[str]:
    return [i["content"] for i in items if isinstance(i, dict) and i.get("role") == "user"]


def tool_outputs(result: RunResult) -> list[str]:
    return [str(i.output) for i in result.new_items if i.type == "tool_call_output_item"]


def stuck(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
    return ("read_file", {"path": "a.txt"})


__all__ = ["Agent", "Decide", "Files", "GuardStopped", "LoopwardenGuard", "MaxTurnsExceeded", "ModelCall", "ModelStep",
           "RunResult", "Runner", "Script", "ScriptedModel", "assistant_message", "function_call", "run", "stuck",
           "tool_outputs", "user_texts"]  # fmt: skip
