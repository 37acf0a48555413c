"""The LangChain v1 middleware on real `create_agent` agents (LangGraph underneath) with a
scripted chat model: the same ladder as loopwarden's own runs, sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents.middleware")

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool

from loopwarden import Budgets, LoopConfig
from loopwarden.adapters.langchain import LoopwardenMiddleware
from loopwarden.config import ASSEMBLED_MARK
from loopwarden.trace.store import RunStore


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


@dataclass
class Files:
    reads: list[str] = field(default_factory=list)

    def tools(self) -> list[StructuredTool]:
        def read_file(path: str) -> str:
            """Read a text file.

            Args:
                path: the file name
            """
            self.reads.append(path)
            return f"contents of {path}"

        def finish(answer: str) -> str:
            """Give the final answer.

            Args:
                answer: the answer
            """
            return answer

        return [StructuredTool.from_function(read_file), StructuredTool.from_function(finish, return_direct=True)]


def invoke(agent: Any, prompt: str, mode: str) -> dict[str, Any]:
    payload = {"messages": [("user", prompt)]}
    if mode == "sync":
        return agent.invoke(payload)  # type: ignore[no-any-return]
    return asyncio.run(agent.ainvoke(payload))  # type: ignore[no-any-return]


def stuck(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
    return ("read_file", {"path": "a.txt"})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_model_gets_the_whole_ladder_and_the_state_says_why(mode: str, tmp_path: Path) -> None:
    files, script = Files(), Script(stuck)
    store = RunStore(tmp_path / "runs.db")
    agent = create_agent(ScriptedChat(script=script), files.tools()[:1], middleware=[LoopwardenMiddleware(trace=store)])
    state = invoke(agent, "Summarise a.txt", mode)

    assert files.reads == ["a.txt"]  # run once; every repeat answered from memory
    repeats = [m for m in state["messages"] if isinstance(m, ToolMessage)][1:]
    assert repeats and all("repeated call" in str(m.content) for m in repeats)
    nudged = [i for i, s in enumerate(script.seen) if any(isinstance(m, HumanMessage) for m in s.messages[1:])]
    assert nudged and "repeating" in str(script.seen[nudged[0]].messages[-1].content)  # the nudge, after the results
    # the wrap-up: asked for the answer with no tools, then (still calling) with tool_choice "none"
    assert [(s.tools, s.choice) for s in script.seen[-2:]] == [([], None), (["read_file"], "none")]
    assert state["messages"][-1].content.startswith(ASSEMBLED_MARK)  # no answer came: what the tools gave
    guard = state["loopwarden"]
    assert guard["stop_reason"] == "repeated_call" and guard["status"] == "degraded"
    assert guard["detectors"] == ["repeated_call"]
    assert isinstance(state["messages"][-1], AIMessage) and not state["messages"][-1].tool_calls

    kinds = [e.type for e in store.events(guard["run_id"])]  # loopwarden's own events, traced
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "nudge_injected" in kinds and "phase_ended" in kinds


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_narrowing_forces_the_terminal_tool(mode: str) -> None:
    def obeys_a_forced_choice(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == "finish":
            return ("finish", {"answer": "a.txt says: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script = Files(), Script(obeys_a_forced_choice)
    middleware = LoopwardenMiddleware(terminal_tools=frozenset({"finish"}))
    agent = create_agent(ScriptedChat(script=script), files.tools(), middleware=[middleware])
    state = invoke(agent, "Summarise a.txt", mode)
    assert [s.choice for s in script.seen].count("finish") == 1
    assert state["messages"][-1].content == "a.txt says: contents"
    assert state["loopwarden"]["status"] == "completed" and files.reads == ["a.txt"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hard_budget_ends_the_agent_without_another_model_call(mode: str) -> None:
    files, script = Files(), Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    config = LoopConfig(budgets=Budgets(max_model_calls=3))
    agent = create_agent(ScriptedChat(script=script), files.tools()[:1], middleware=[LoopwardenMiddleware(config)])
    state = invoke(agent, "Read every part", mode)
    assert len(script.seen) == 3 and len(files.reads) == 3
    assert state["loopwarden"]["stop_reason"] == "model_call_budget"
    assert "budget" in str(state["messages"][-1].content)


def test_a_healthy_run_is_untouched() -> None:
    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 14 else "All parts read."

    runs = []
    for middleware in ([], [LoopwardenMiddleware()]):
        files, script = Files(), Script(healthy)
        agent = create_agent(ScriptedChat(script=script), files.tools()[:1], middleware=middleware)
        state = invoke(agent, "Read every part", "async")
        runs.append(
            (files.reads, [(m.type, str(m.content)) for m in state["messages"]], [s.tools for s in script.seen])
        )
    assert runs[0] == runs[1]
    assert len(runs[1][0]) == 14
