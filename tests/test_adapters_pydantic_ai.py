"""The PydanticAI adapter on PydanticAI's real agent graph, with its own scripted test model
(`FunctionModel`): the same ladder as loopwarden's own runs, `run` and `run_sync`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

pytest.importorskip("pydantic_ai.capabilities")

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

from loopwarden import Budgets, LoopConfig
from loopwarden.adapters.pydantic_ai import GuardStopped, Loopwarden
from loopwarden.config import ASSEMBLED_MARK
from loopwarden.trace.store import RunStore

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


@dataclass
class Files:
    reads: list[str] = field(default_factory=list)

    def tools(self) -> list[Callable[..., str]]:
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

        return [read_file, finish]


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


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_model_gets_the_whole_ladder_and_the_guard_says_why(mode: str, tmp_path: Path) -> None:
    files, script = Files(), Script(stuck)
    store = RunStore(tmp_path / "runs.db")
    guard = Loopwarden(trace=store)
    result = run(Agent(script.model(), tools=files.tools()[:1], capabilities=[guard]), "Summarise a.txt", mode)

    assert files.reads == ["a.txt"]  # run once; every repeat answered from memory
    repeats = tool_returns(result.all_messages())[1:]
    assert repeats and all("repeated call" in r for r in repeats)
    nudged = [i for i, s in enumerate(script.seen) if len(user_texts(s.messages)) > 1]
    assert nudged and "repeating" in user_texts(script.seen[nudged[0]].messages)[-1]  # the nudge, after the results
    assert isinstance(script.seen[nudged[0]].messages[-1].parts[0], UserPromptPart)
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
def test_narrowing_forces_the_terminal_tool(mode: str) -> None:
    def obeys_a_forced_choice(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == ["finish"]:
            return ("finish", {"answer": "a.txt says: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script = Files(), Script(obeys_a_forced_choice)
    guard = Loopwarden(terminal_tools={"finish"})
    result = run(Agent(script.model(), tools=files.tools(), capabilities=[guard]), "Summarise a.txt", mode)
    assert [s.choice for s in script.seen].count(["finish"]) == 1
    assert result.output == "a.txt says: contents"
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed" and files.reads == ["a.txt"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hard_budget_ends_the_run_without_another_model_call(mode: str) -> None:
    files, script = Files(), Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = Loopwarden(LoopConfig(budgets=Budgets(max_model_calls=3)))
    result = run(Agent(script.model(), tools=files.tools()[:1], capabilities=[guard]), "Read every part", mode)
    assert len(script.seen) == 3 and len(files.reads) == 3
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "model_call_budget"
    assert "budget" in str(result.output)


def test_the_framework_limit_still_applies_and_runs_are_kept_apart() -> None:
    files, script = Files(), Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = Loopwarden()
    agent = Agent(script.model(), tools=files.tools()[:1], capabilities=[guard])
    with pytest.raises(UsageLimitExceeded):
        agent.run_sync("Read every part", usage_limits=UsageLimits(request_limit=4))

    script.decide = lambda i, tools, choice: "nothing to read"
    result = agent.run_sync("Say hello")  # a new run: a new guard session
    summary = guard.summary(result)
    assert result.output == "nothing to read"
    assert summary is not None and summary["status"] == "completed" and summary["detectors"] == []


def test_parallel_repeats_in_one_turn_run_once() -> None:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("both read")])
        return ModelResponse(
            parts=[ToolCallPart("read_file", {"path": "a.txt"}, tool_call_id=f"p{i}") for i in range(3)]
        )

    files = Files()
    result = Agent(FunctionModel(respond), tools=files.tools()[:1], capabilities=[Loopwarden()]).run_sync("Read a")
    assert files.reads == ["a.txt"]
    returns = tool_returns(result.all_messages())
    assert returns[0] == "contents of a.txt" and len(returns) == 3
    assert all("a.txt" in r for r in returns[1:])  # the others answered with the same result
    assert result.output == "both read"


def test_a_healthy_run_is_untouched() -> None:
    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 14 else "All parts read."

    runs = []
    for capabilities in ([], [Loopwarden()]):
        files, script = Files(), Script(healthy)
        result = Agent(script.model(), tools=files.tools()[:1], capabilities=capabilities).run_sync("Read all")
        texts = [user_texts(s.messages) + tool_returns(s.messages) for s in script.seen]
        runs.append((files.reads, texts, [(s.tools, s.choice) for s in script.seen], result.output))
    assert runs[0] == runs[1]
    assert len(runs[1][0]) == 14


def test_a_streamed_run_is_guarded_too() -> None:
    from pydantic_ai.models.function import DeltaToolCall

    streamed: list[list[str]] = []

    async def stuck_stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        streamed.append([t.name for t in info.function_tools])
        if not info.function_tools and isinstance(messages[-1].parts[-1], UserPromptPart):
            yield "a.txt has the contents."
            return
        yield {0: DeltaToolCall("read_file", '{"path": "a.txt"}', tool_call_id=f"s{len(streamed)}")}

    async def main() -> tuple[str, Any]:
        agent = Agent(FunctionModel(stream_function=stuck_stream), tools=files.tools()[:1], capabilities=[guard])
        async with agent.run_stream("Summarise a.txt") as result:
            return await result.get_output(), result

    files, guard = Files(), Loopwarden()
    output, result = asyncio.run(main())
    assert files.reads == ["a.txt"]
    assert [] in streamed and len(streamed) < 10  # narrowed to no tools, then stopped
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "repeated_call", summary
    assert output == "a.txt has the contents."


class Summary(BaseModel):
    text: str


def test_structured_output_narrowing_forces_the_output_tool() -> None:
    def obeys(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == ["final_result"]:
            return ("final_result", {"text": "a.txt: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script, guard = Files(), Script(obeys), Loopwarden()
    agent = Agent(script.model(), tools=files.tools()[:1], output_type=Summary, capabilities=[guard])
    result = agent.run_sync("Summarise a.txt")
    assert result.output == Summary(text="a.txt: contents") and files.reads == ["a.txt"]
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed", summary
    assert summary["detectors"] == ["repeated_call"]


def test_a_stop_with_structured_output_raises_a_clear_error() -> None:
    files, guard = Files(), Loopwarden()
    agent = Agent(Script(stuck).model(), tools=files.tools()[:1], output_type=Summary, capabilities=[guard])
    with pytest.raises(GuardStopped, match=r"stopped the run \(repeated_call\)") as stopped:
        agent.run_sync("Summarise a.txt")
    assert stopped.value.summary["stop_reason"] == "repeated_call" and files.reads == ["a.txt"]
