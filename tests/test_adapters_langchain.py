"""The LangChain v1 middleware on real `create_agent` agents (LangGraph underneath) with a
scripted chat model: the same ladder as loopwarden's own runs, sync and async."""

from __future__ import annotations

import importlib
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from loopwarden import Budgets, LoopConfig
from loopwarden.config import ASSEMBLED_MARK
from loopwarden.trace.store import RunStore

if find_spec("langchain") is None:  # looked up here, imported by the fixture (tests/langchainkit.py says why)
    pytest.skip("langchain is not installed", allow_module_level=True)


@pytest.fixture
def lc() -> ModuleType:  # imported once per process (sys.modules): no module scope needed
    pytest.importorskip("langchain.agents.middleware")
    return importlib.import_module("langchainkit")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_model_gets_the_whole_ladder_and_the_state_says_why(mode: str, tmp_path: Path, lc: ModuleType) -> None:
    files, script = lc.Files(), lc.Script(lc.stuck)
    store = RunStore(tmp_path / "runs.db")
    agent = lc.create_agent(
        lc.ScriptedChat(script=script), files.tools()[:1], middleware=[lc.LoopwardenMiddleware(trace=store)]
    )
    state = lc.invoke(agent, "Summarise a.txt", mode)

    assert files.reads == ["a.txt"]  # run once; every repeat answered from memory
    repeats = [m for m in state["messages"] if isinstance(m, lc.ToolMessage)][1:]
    assert repeats and all("repeated call" in str(m.content) for m in repeats)
    nudged = [i for i, s in enumerate(script.seen) if any(isinstance(m, lc.HumanMessage) for m in s.messages[1:])]
    assert nudged and "repeating" in str(script.seen[nudged[0]].messages[-1].content)  # the nudge, after the results
    # the wrap-up: asked for the answer with no tools, then (still calling) with tool_choice "none"
    assert [(s.tools, s.choice) for s in script.seen[-2:]] == [([], None), (["read_file"], "none")]
    assert state["messages"][-1].content.startswith(ASSEMBLED_MARK)  # no answer came: what the tools gave
    guard = state["loopwarden"]
    assert guard["stop_reason"] == "repeated_call" and guard["status"] == "degraded"
    assert guard["detectors"] == ["repeated_call"]
    assert isinstance(state["messages"][-1], lc.AIMessage) and not state["messages"][-1].tool_calls

    kinds = [e.type for e in store.events(guard["run_id"])]  # loopwarden's own events, traced
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "nudge_injected" in kinds and "phase_ended" in kinds


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_narrowing_forces_the_terminal_tool(mode: str, lc: ModuleType) -> None:
    def obeys_a_forced_choice(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == "finish":
            return ("finish", {"answer": "a.txt says: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script = lc.Files(), lc.Script(obeys_a_forced_choice)
    middleware = lc.LoopwardenMiddleware(terminal_tools=frozenset({"finish"}))
    agent = lc.create_agent(lc.ScriptedChat(script=script), files.tools(), middleware=[middleware])
    state = lc.invoke(agent, "Summarise a.txt", mode)
    assert [s.choice for s in script.seen].count("finish") == 1
    assert state["messages"][-1].content == "a.txt says: contents"
    assert state["loopwarden"]["status"] == "completed" and files.reads == ["a.txt"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hard_budget_ends_the_agent_without_another_model_call(mode: str, lc: ModuleType) -> None:
    files, script = lc.Files(), lc.Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    config = LoopConfig(budgets=Budgets(max_model_calls=3))
    agent = lc.create_agent(
        lc.ScriptedChat(script=script), files.tools()[:1], middleware=[lc.LoopwardenMiddleware(config)]
    )
    state = lc.invoke(agent, "Read every part", mode)
    assert len(script.seen) == 3 and len(files.reads) == 3
    assert state["loopwarden"]["stop_reason"] == "model_call_budget"
    assert "budget" in str(state["messages"][-1].content)


def test_a_healthy_run_is_untouched(lc: ModuleType) -> None:
    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 14 else "All parts read."

    runs = []
    for middleware in ([], [lc.LoopwardenMiddleware()]):
        files, script = lc.Files(), lc.Script(healthy)
        agent = lc.create_agent(lc.ScriptedChat(script=script), files.tools()[:1], middleware=middleware)
        state = lc.invoke(agent, "Read every part", "async")
        runs.append(
            (files.reads, [(m.type, str(m.content)) for m in state["messages"]], [s.tools for s in script.seen])
        )
    assert runs[0] == runs[1]
    assert len(runs[1][0]) == 14
