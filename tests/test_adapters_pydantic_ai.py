"""The PydanticAI adapter on PydanticAI's real agent graph, with its own scripted test model
(`FunctionModel`): the same ladder as loopwarden's own runs, `run` and `run_sync`."""

from __future__ import annotations

import asyncio
import importlib
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

from loopwarden import Budgets, LoopConfig
from loopwarden.config import ASSEMBLED_MARK
from loopwarden.trace.store import RunStore

pytestmark = pytest.mark.usefixtures("framework_loop_closed")  # conftest.py: run_sync's loop

if find_spec("pydantic_ai") is None:  # looked up here, imported by the fixture (tests/pydanticaikit.py says why)
    pytest.skip("pydantic_ai is not installed", allow_module_level=True)


@pytest.fixture
def pai() -> ModuleType:  # imported once per process (sys.modules): no module scope needed
    pytest.importorskip("pydantic_ai.capabilities")
    return importlib.import_module("pydanticaikit")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_model_gets_the_whole_ladder_and_the_guard_says_why(mode: str, tmp_path: Path, pai: ModuleType) -> None:
    files, script = pai.Files(), pai.Script(pai.stuck)
    store = RunStore(tmp_path / "runs.db")
    guard = pai.Loopwarden(trace=store)
    result = pai.run(pai.Agent(script.model(), tools=files.tools()[:1], capabilities=[guard]), "Summarise a.txt", mode)

    assert files.reads == ["a.txt"]  # run once; every repeat answered from memory
    repeats = pai.tool_returns(result.all_messages())[1:]
    assert repeats and all("repeated call" in r for r in repeats)
    nudged = [i for i, s in enumerate(script.seen) if len(pai.user_texts(s.messages)) > 1]
    assert nudged and "repeating" in pai.user_texts(script.seen[nudged[0]].messages)[-1]  # the nudge, after the results
    assert isinstance(script.seen[nudged[0]].messages[-1].parts[0], pai.UserPromptPart)
    # the wrap-up: asked for the answer with no tools, then (still calling) with tool_choice "none"
    assert [(s.tools, s.choice) for s in script.seen[-2:]] == [([], None), (["read_file"], "none")]
    assert isinstance(result.output, str) and result.output.startswith(ASSEMBLED_MARK)
    summary = guard.summary(result)
    assert summary is not None and summary["run_id"] == result.run_id
    assert summary["stop_reason"] == "repeated_call" and summary["status"] == "degraded"
    assert summary["detectors"] == ["repeated_call"]

    kinds = [e.type for e in store.events(summary["run_id"])]  # loopwarden's own events, traced
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "nudge_injected" in kinds and "phase_ended" in kinds


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_narrowing_forces_the_terminal_tool(mode: str, pai: ModuleType) -> None:
    def obeys_a_forced_choice(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == ["finish"]:
            return ("finish", {"answer": "a.txt says: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script = pai.Files(), pai.Script(obeys_a_forced_choice)
    guard = pai.Loopwarden(terminal_tools={"finish"})
    result = pai.run(pai.Agent(script.model(), tools=files.tools(), capabilities=[guard]), "Summarise a.txt", mode)
    assert [s.choice for s in script.seen].count(["finish"]) == 1
    assert result.output == "a.txt says: contents"
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed" and files.reads == ["a.txt"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hard_budget_ends_the_run_without_another_model_call(mode: str, pai: ModuleType) -> None:
    files, script = pai.Files(), pai.Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = pai.Loopwarden(LoopConfig(budgets=Budgets(max_model_calls=3)))
    result = pai.run(pai.Agent(script.model(), tools=files.tools()[:1], capabilities=[guard]), "Read every part", mode)
    assert len(script.seen) == 3 and len(files.reads) == 3
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "model_call_budget"
    assert "budget" in str(result.output)


def test_the_framework_limit_still_applies_and_runs_are_kept_apart(pai: ModuleType) -> None:
    files, script = pai.Files(), pai.Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = pai.Loopwarden()
    agent = pai.Agent(script.model(), tools=files.tools()[:1], capabilities=[guard])
    with pytest.raises(pai.UsageLimitExceeded):
        agent.run_sync("Read every part", usage_limits=pai.UsageLimits(request_limit=4))

    script.decide = lambda i, tools, choice: "nothing to read"
    result = agent.run_sync("Say hello")  # a new run: a new guard session
    summary = guard.summary(result)
    assert result.output == "nothing to read"
    assert summary is not None and summary["status"] == "completed" and summary["detectors"] == []


def test_parallel_repeats_in_one_turn_run_once(pai: ModuleType) -> None:
    def respond(messages: list[pai.ModelMessage], info: pai.AgentInfo) -> pai.ModelResponse:
        if len(messages) > 1:
            return pai.ModelResponse(parts=[pai.TextPart("both read")])
        return pai.ModelResponse(
            parts=[pai.ToolCallPart("read_file", {"path": "a.txt"}, tool_call_id=f"p{i}") for i in range(3)]
        )

    files = pai.Files()
    result = pai.Agent(pai.FunctionModel(respond), tools=files.tools()[:1], capabilities=[pai.Loopwarden()]).run_sync(
        "Read a"
    )
    assert files.reads == ["a.txt"]
    returns = pai.tool_returns(result.all_messages())
    assert returns[0] == "contents of a.txt" and len(returns) == 3
    assert all("a.txt" in r for r in returns[1:])  # the others answered with the same result
    assert result.output == "both read"


def test_a_healthy_run_is_untouched(pai: ModuleType) -> None:
    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 14 else "All parts read."

    runs = []
    for capabilities in ([], [pai.Loopwarden()]):
        files, script = pai.Files(), pai.Script(healthy)
        result = pai.Agent(script.model(), tools=files.tools()[:1], capabilities=capabilities).run_sync("Read all")
        texts = [pai.user_texts(s.messages) + pai.tool_returns(s.messages) for s in script.seen]
        runs.append((files.reads, texts, [(s.tools, s.choice) for s in script.seen], result.output))
    assert runs[0] == runs[1]
    assert len(runs[1][0]) == 14


def test_a_streamed_run_is_guarded_too(pai: ModuleType) -> None:
    from pydantic_ai.models.function import DeltaToolCall

    streamed: list[list[str]] = []

    async def stuck_stream(messages: list[pai.ModelMessage], info: pai.AgentInfo) -> Any:
        streamed.append([t.name for t in info.function_tools])
        if not info.function_tools and isinstance(messages[-1].parts[-1], pai.UserPromptPart):
            yield "a.txt has the contents."
            return
        yield {0: DeltaToolCall("read_file", '{"path": "a.txt"}', tool_call_id=f"s{len(streamed)}")}

    async def main() -> tuple[str, Any]:
        agent = pai.Agent(
            pai.FunctionModel(stream_function=stuck_stream), tools=files.tools()[:1], capabilities=[guard]
        )
        async with agent.run_stream("Summarise a.txt") as result:
            return await result.get_output(), result

    files, guard = pai.Files(), pai.Loopwarden()
    output, result = asyncio.run(main())
    assert files.reads == ["a.txt"]
    assert [] in streamed and len(streamed) < 10  # narrowed to no tools, then stopped
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "repeated_call", summary
    assert output == "a.txt has the contents."


class Summary(BaseModel):
    text: str


def test_structured_output_narrowing_forces_the_output_tool(pai: ModuleType) -> None:
    def obeys(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == ["final_result"]:
            return ("final_result", {"text": "a.txt: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script, guard = pai.Files(), pai.Script(obeys), pai.Loopwarden()
    agent = pai.Agent(script.model(), tools=files.tools()[:1], output_type=Summary, capabilities=[guard])
    result = agent.run_sync("Summarise a.txt")
    assert result.output == Summary(text="a.txt: contents") and files.reads == ["a.txt"]
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed", summary
    assert summary["detectors"] == ["repeated_call"]


def test_a_stop_with_structured_output_raises_a_clear_error(pai: ModuleType) -> None:
    files, guard = pai.Files(), pai.Loopwarden()
    agent = pai.Agent(pai.Script(pai.stuck).model(), tools=files.tools()[:1], output_type=Summary, capabilities=[guard])
    with pytest.raises(pai.GuardStopped, match=r"stopped the run \(repeated_call\)") as stopped:
        agent.run_sync("Summarise a.txt")
    assert stopped.value.summary["stop_reason"] == "repeated_call" and files.reads == ["a.txt"]
