"""The OpenAI Agents SDK adapter on the SDK's real `Runner` loop, with the SDK's own scripted
test model (`agents.testing.ScriptedModel`): the same ladder as loopwarden's own runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents.testing")

from agents import Agent, MaxTurnsExceeded, Runner, RunResult, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from loopwarden import Budgets, LoopConfig
from loopwarden.adapters.openai_agents import GuardStopped, LoopwardenGuard
from loopwarden.config import ASSEMBLED_MARK
from loopwarden.trace.store import RunStore

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


@dataclass
class Files:
    reads: list[str] = field(default_factory=list)

    def tools(self) -> list[Any]:
        @function_tool
        def read_file(path: str) -> str:
            """Read a text file.

            Args:
                path: the file name
            """
            self.reads.append(path)
            return f"contents of {path}"

        @function_tool
        def finish(answer: str) -> str:
            """Give the final answer.

            Args:
                answer: the answer
            """
            return answer

        return [read_file, finish]


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


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_model_gets_the_whole_ladder_and_the_guard_says_why(mode: str, tmp_path: Path) -> None:
    files, script = Files(), Script(stuck)
    store = RunStore(tmp_path / "runs.db")
    guard = LoopwardenGuard(trace=store)
    agent = guard.wrap(Agent(name="reader", model=script.model(), tools=files.tools()[:1]))
    result = run(agent, "Summarise a.txt", mode)

    assert files.reads == ["a.txt"]  # run once; every repeat answered from memory
    repeats = tool_outputs(result)[1:]
    assert repeats and all("repeated call" in r for r in repeats)
    nudged = [i for i, s in enumerate(script.seen) if len(user_texts(s.input)) > 1]
    assert nudged and "repeating" in user_texts(script.seen[nudged[0]].input)[-1]  # the nudge, after the results
    assert script.seen[nudged[0]].input[-1]["role"] == "user"
    # the wrap-up: asked for the answer with no tools, then (still calling) with tool_choice "none"
    assert [(s.tools, s.choice) for s in script.seen[-2:]] == [([], None), (["read_file"], "none")]
    assert isinstance(result.final_output, str) and result.final_output.startswith(ASSEMBLED_MARK)
    summary = guard.summary(result)
    assert summary is not None
    assert summary["stop_reason"] == "repeated_call" and summary["status"] == "degraded"
    assert summary["detectors"] == ["repeated_call"]

    kinds = [e.type for e in store.events(summary["run_id"])]  # loopwarden's own events, traced
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "nudge_injected" in kinds and "phase_ended" in kinds


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_narrowing_forces_the_terminal_tool(mode: str) -> None:
    def obeys_a_forced_choice(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == "finish":
            return ("finish", {"answer": "a.txt says: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script = Files(), Script(obeys_a_forced_choice)
    guard = LoopwardenGuard(terminal_tools={"finish"})
    result = run(guard.wrap(Agent(name="reader", model=script.model(), tools=files.tools())), "Summarise a.txt", mode)
    assert [s.choice for s in script.seen].count("finish") == 1
    assert result.final_output == "a.txt says: contents"
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed" and files.reads == ["a.txt"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hard_budget_ends_the_run_without_another_model_call(mode: str) -> None:
    files, script = Files(), Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = LoopwardenGuard(LoopConfig(budgets=Budgets(max_model_calls=3)))
    result = run(guard.wrap(Agent(name="reader", model=script.model(), tools=files.tools()[:1])), "Read all", mode)
    assert len(script.seen) == 3 and len(files.reads) == 3
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "model_call_budget"
    assert "budget" in str(result.final_output)


def test_the_sdk_own_limit_still_applies_and_runs_are_kept_apart() -> None:
    files, script = Files(), Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = LoopwardenGuard()
    agent = guard.wrap(Agent(name="reader", model=script.model(), tools=files.tools()[:1]))
    with pytest.raises(MaxTurnsExceeded):
        asyncio.run(Runner.run(agent, "Read every part", max_turns=4))

    def answers(i: int, tools: list[str], choice: Any) -> str:
        return "nothing to read"

    script.decide = answers
    result = asyncio.run(Runner.run(agent, "Say hello"))  # a new run: a new guard session
    summary = guard.summary(result)
    assert result.final_output == "nothing to read"
    assert summary is not None and summary["status"] == "completed" and summary["detectors"] == []


def test_parallel_repeats_in_one_turn_run_once() -> None:
    calls = {"n": 0}

    def respond(call: ModelCall) -> Any:
        calls["n"] += 1
        if calls["n"] > 1:
            return [assistant_message("both read")]
        return [function_call("read_file", {"path": "a.txt"}, call_id=f"p{i}") for i in range(3)]

    files = Files()
    guard = LoopwardenGuard()
    model = ScriptedModel([ModelStep.respond(respond) for _ in range(5)])
    result = asyncio.run(Runner.run(guard.wrap(Agent(name="r", model=model, tools=files.tools()[:1])), "Read a"))
    assert files.reads == ["a.txt"]
    outputs = tool_outputs(result)
    assert outputs[0] == "contents of a.txt" and len(outputs) == 3
    assert all("a.txt" in o for o in outputs[1:])  # the others answered with the same result
    assert result.final_output == "both read"


def test_a_healthy_run_is_untouched() -> None:
    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 14 else "All parts read."

    runs = []
    for guarded in (False, True):
        files, script = Files(), Script(healthy)
        agent = Agent(name="reader", model=script.model(), tools=files.tools()[:1])
        result = asyncio.run(Runner.run(LoopwardenGuard().wrap(agent) if guarded else agent, "Read all", max_turns=20))
        runs.append(
            (files.reads, [str(s.input) for s in script.seen], [s.tools for s in script.seen], result.final_output)
        )
    assert runs[0] == runs[1]
    assert len(runs[1][0]) == 14


def test_a_streamed_run_is_guarded_too() -> None:
    files, script = Files(), Script(stuck)
    guard = LoopwardenGuard()
    agent = guard.wrap(Agent(name="reader", model=script.model(), tools=files.tools()[:1]))

    async def main() -> Any:
        result = Runner.run_streamed(agent, "Summarise a.txt", max_turns=30)
        kinds = [event.type async for event in result.stream_events()]
        assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
        return result

    result = asyncio.run(main())
    assert files.reads == ["a.txt"]
    assert [(s.tools, s.choice) for s in script.seen[-2:]] == [([], None), (["read_file"], "none")]
    assert isinstance(result.final_output, str) and result.final_output.startswith(ASSEMBLED_MARK)
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "repeated_call"


def test_a_stop_with_structured_output_raises_a_clear_error() -> None:
    from pydantic import BaseModel

    class Summary(BaseModel):
        text: str

    files, script, guard = Files(), Script(stuck), LoopwardenGuard()
    agent = guard.wrap(Agent(name="r", model=script.model(), tools=files.tools()[:1], output_type=Summary))
    with pytest.raises(GuardStopped, match=r"stopped the run \(repeated_call\)") as stopped:
        asyncio.run(Runner.run(agent, "Summarise a.txt"))
    assert stopped.value.summary["stop_reason"] == "repeated_call" and files.reads == ["a.txt"]


def test_concurrent_runs_of_one_guard_are_kept_apart() -> None:
    """Two runs at once through one guard: each its own session (the SDK's per-run owner), the
    stuck one stopped, the healthy one untouched."""

    def scripted(prefix: str, decide: Decide) -> tuple[Script, ScriptedModel]:
        script = Script(decide)

        def respond(call: ModelCall) -> Any:
            out = script.respond(call)
            return [
                function_call(o.name, o.arguments, call_id=f"{prefix}{o.call_id}") if o.type == "function_call" else o
                for o in out
            ]

        return script, ScriptedModel([ModelStep.respond(respond) for _ in range(60)])

    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 8 else "All parts read."

    guard, stuck_files, healthy_files = LoopwardenGuard(), Files(), Files()
    _, stuck_model = scripted("s", stuck)
    _, healthy_model = scripted("h", healthy)
    agents = [
        guard.wrap(Agent(name="stuck", model=stuck_model, tools=stuck_files.tools()[:1])),
        guard.wrap(Agent(name="healthy", model=healthy_model, tools=healthy_files.tools()[:1])),
    ]

    async def both() -> list[RunResult]:
        return list(await asyncio.gather(*(Runner.run(a, "Read", max_turns=30) for a in agents)))

    stuck_result, healthy_result = asyncio.run(both())
    stuck_summary, healthy_summary = guard.summary(stuck_result), guard.summary(healthy_result)
    assert stuck_summary is not None and healthy_summary is not None
    assert stuck_summary["run_id"] != healthy_summary["run_id"]
    assert stuck_summary["stop_reason"] == "repeated_call" and stuck_files.reads == ["a.txt"]
    assert healthy_summary["status"] == "completed" and healthy_summary["detectors"] == []
    assert len(healthy_files.reads) == 8 and healthy_result.final_output == "All parts read."


def test_a_handoff_to_a_wrapped_agent_gets_that_agent_its_own_guard_session() -> None:
    def triage(call: ModelCall) -> Any:
        return [function_call("transfer_to_reader", {}, call_id="t1")]

    files, script, guard = Files(), Script(stuck), LoopwardenGuard()
    reader = guard.wrap(Agent(name="reader", model=script.model(), tools=files.tools()[:1]))
    front = guard.wrap(Agent(name="triage", model=ScriptedModel([ModelStep.respond(triage)]), handoffs=[reader]))
    result = asyncio.run(Runner.run(front, "Summarise a.txt", max_turns=30))
    assert result.last_agent.name == "reader"
    assert files.reads == ["a.txt"] and script.seen[0].tools == ["read_file"]  # the reader's tools all offered
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "repeated_call", summary


def test_wrap_says_what_it_takes() -> None:
    with pytest.raises(TypeError, match=r"takes an agents\.Agent"):
        LoopwardenGuard().wrap("not an agent")  # type: ignore[arg-type]


def test_a_model_call_the_sdk_retries_keeps_the_guard_turn() -> None:
    from agents import ModelSettings
    from agents.retry import ModelRetrySettings

    calls = {"n": 0}

    def flaky(call: ModelCall) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("the connection dropped")
        if calls["n"] > 3:
            return [assistant_message("read")]
        return [function_call("read_file", {"path": f"{calls['n']}.txt"}, call_id=f"r{calls['n']}")]

    files, guard = Files(), LoopwardenGuard()
    settings = ModelSettings(retry=ModelRetrySettings(max_retries=2, policy=lambda context: True))
    model = ScriptedModel([ModelStep.respond(flaky) for _ in range(6)])
    agent = guard.wrap(Agent(name="r", model=model, tools=files.tools()[:1], model_settings=settings))
    result = asyncio.run(Runner.run(agent, "Read"))
    assert result.final_output == "read" and files.reads == ["1.txt", "3.txt"]
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed"
