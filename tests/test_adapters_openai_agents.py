"""The OpenAI Agents SDK adapter on the SDK's real `Runner` loop, with the SDK's own scripted
test model (`agents.testing.ScriptedModel`): the same ladder as loopwarden's own runs."""

from __future__ import annotations

import asyncio
import importlib
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from loopwarden import Budgets, LoopConfig
from loopwarden.config import ASSEMBLED_MARK
from loopwarden.trace.store import RunStore

pytestmark = pytest.mark.usefixtures("framework_loop_closed")  # conftest.py: run_sync's loop

if find_spec("agents") is None:  # looked up here, imported by the fixture (tests/agentskit.py says why)
    pytest.skip("the OpenAI Agents SDK is not installed", allow_module_level=True)


@pytest.fixture
def sdk() -> ModuleType:  # imported once per process (sys.modules): no module scope needed
    pytest.importorskip("agents.testing")
    return importlib.import_module("agentskit")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_model_gets_the_whole_ladder_and_the_guard_says_why(mode: str, tmp_path: Path, sdk: ModuleType) -> None:
    files, script = sdk.Files(), sdk.Script(sdk.stuck)
    store = RunStore(tmp_path / "runs.db")
    guard = sdk.LoopwardenGuard(trace=store)
    agent = guard.wrap(sdk.Agent(name="reader", model=script.model(), tools=files.tools()[:1]))
    result = sdk.run(agent, "Summarise a.txt", mode)

    assert files.reads == ["a.txt"]  # run once; every repeat answered from memory
    repeats = sdk.tool_outputs(result)[1:]
    assert repeats and all("repeated call" in r for r in repeats)
    nudged = [i for i, s in enumerate(script.seen) if len(sdk.user_texts(s.input)) > 1]
    assert nudged and "repeating" in sdk.user_texts(script.seen[nudged[0]].input)[-1]  # the nudge, after the results
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
def test_narrowing_forces_the_terminal_tool(mode: str, sdk: ModuleType) -> None:
    def obeys_a_forced_choice(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        if choice == "finish":
            return ("finish", {"answer": "a.txt says: contents"})
        return ("read_file", {"path": "a.txt"})

    files, script = sdk.Files(), sdk.Script(obeys_a_forced_choice)
    guard = sdk.LoopwardenGuard(terminal_tools={"finish"})
    result = sdk.run(
        guard.wrap(sdk.Agent(name="reader", model=script.model(), tools=files.tools())), "Summarise a.txt", mode
    )
    assert [s.choice for s in script.seen].count("finish") == 1
    assert result.final_output == "a.txt says: contents"
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed" and files.reads == ["a.txt"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hard_budget_ends_the_run_without_another_model_call(mode: str, sdk: ModuleType) -> None:
    files, script = sdk.Files(), sdk.Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = sdk.LoopwardenGuard(LoopConfig(budgets=Budgets(max_model_calls=3)))
    result = sdk.run(
        guard.wrap(sdk.Agent(name="reader", model=script.model(), tools=files.tools()[:1])), "Read all", mode
    )
    assert len(script.seen) == 3 and len(files.reads) == 3
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "model_call_budget"
    assert "budget" in str(result.final_output)


def test_the_sdk_own_limit_still_applies_and_runs_are_kept_apart(sdk: ModuleType) -> None:
    files, script = sdk.Files(), sdk.Script(lambda i, tools, choice: ("read_file", {"path": f"part-{i}.txt"}))
    guard = sdk.LoopwardenGuard()
    agent = guard.wrap(sdk.Agent(name="reader", model=script.model(), tools=files.tools()[:1]))
    with pytest.raises(sdk.MaxTurnsExceeded):
        asyncio.run(sdk.Runner.run(agent, "Read every part", max_turns=4))

    def answers(i: int, tools: list[str], choice: Any) -> str:
        return "nothing to read"

    script.decide = answers
    result = asyncio.run(sdk.Runner.run(agent, "Say hello"))  # a new run: a new guard session
    summary = guard.summary(result)
    assert result.final_output == "nothing to read"
    assert summary is not None and summary["status"] == "completed" and summary["detectors"] == []


def test_parallel_repeats_in_one_turn_run_once(sdk: ModuleType) -> None:
    calls = {"n": 0}

    def respond(call: sdk.ModelCall) -> Any:
        calls["n"] += 1
        if calls["n"] > 1:
            return [sdk.assistant_message("both read")]
        return [sdk.function_call("read_file", {"path": "a.txt"}, call_id=f"p{i}") for i in range(3)]

    files = sdk.Files()
    guard = sdk.LoopwardenGuard()
    model = sdk.ScriptedModel([sdk.ModelStep.respond(respond) for _ in range(5)])
    result = asyncio.run(
        sdk.Runner.run(guard.wrap(sdk.Agent(name="r", model=model, tools=files.tools()[:1])), "Read a")
    )
    assert files.reads == ["a.txt"]
    outputs = sdk.tool_outputs(result)
    assert outputs[0] == "contents of a.txt" and len(outputs) == 3
    assert all("a.txt" in o for o in outputs[1:])  # the others answered with the same result
    assert result.final_output == "both read"


def test_a_healthy_run_is_untouched(sdk: ModuleType) -> None:
    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 14 else "All parts read."

    runs = []
    for guarded in (False, True):
        files, script = sdk.Files(), sdk.Script(healthy)
        agent = sdk.Agent(name="reader", model=script.model(), tools=files.tools()[:1])
        result = asyncio.run(
            sdk.Runner.run(sdk.LoopwardenGuard().wrap(agent) if guarded else agent, "Read all", max_turns=20)
        )
        runs.append(
            (files.reads, [str(s.input) for s in script.seen], [s.tools for s in script.seen], result.final_output)
        )
    assert runs[0] == runs[1]
    assert len(runs[1][0]) == 14


def test_a_streamed_run_is_guarded_too(sdk: ModuleType) -> None:
    files, script = sdk.Files(), sdk.Script(sdk.stuck)
    guard = sdk.LoopwardenGuard()
    agent = guard.wrap(sdk.Agent(name="reader", model=script.model(), tools=files.tools()[:1]))

    async def main() -> Any:
        result = sdk.Runner.run_streamed(agent, "Summarise a.txt", max_turns=30)
        kinds = [event.type async for event in result.stream_events()]
        assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
        return result

    result = asyncio.run(main())
    assert files.reads == ["a.txt"]
    assert [(s.tools, s.choice) for s in script.seen[-2:]] == [([], None), (["read_file"], "none")]
    assert isinstance(result.final_output, str) and result.final_output.startswith(ASSEMBLED_MARK)
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "repeated_call"


def test_a_stop_with_structured_output_raises_a_clear_error(sdk: ModuleType) -> None:
    from pydantic import BaseModel

    class Summary(BaseModel):
        text: str

    files, script, guard = sdk.Files(), sdk.Script(sdk.stuck), sdk.LoopwardenGuard()
    agent = guard.wrap(sdk.Agent(name="r", model=script.model(), tools=files.tools()[:1], output_type=Summary))
    with pytest.raises(sdk.GuardStopped, match=r"stopped the run \(repeated_call\)") as stopped:
        asyncio.run(sdk.Runner.run(agent, "Summarise a.txt"))
    assert stopped.value.summary["stop_reason"] == "repeated_call" and files.reads == ["a.txt"]


def test_concurrent_runs_of_one_guard_are_kept_apart(sdk: ModuleType) -> None:
    """Two runs at once through one guard: each its own session (the SDK's per-run owner), the
    stuck one stopped, the healthy one untouched."""

    def scripted(prefix: str, decide: sdk.Decide) -> tuple[sdk.Script, sdk.ScriptedModel]:
        script = sdk.Script(decide)

        def respond(call: sdk.ModelCall) -> Any:
            out = script.respond(call)
            return [
                sdk.function_call(o.name, o.arguments, call_id=f"{prefix}{o.call_id}")
                if o.type == "function_call"
                else o
                for o in out
            ]

        return script, sdk.ScriptedModel([sdk.ModelStep.respond(respond) for _ in range(60)])

    def healthy(i: int, tools: list[str], choice: Any) -> tuple[str, dict[str, Any]] | str:
        return ("read_file", {"path": f"part-{i}.txt"}) if i <= 8 else "All parts read."

    guard, stuck_files, healthy_files = sdk.LoopwardenGuard(), sdk.Files(), sdk.Files()
    _, stuck_model = scripted("s", sdk.stuck)
    _, healthy_model = scripted("h", healthy)
    agents = [
        guard.wrap(sdk.Agent(name="stuck", model=stuck_model, tools=stuck_files.tools()[:1])),
        guard.wrap(sdk.Agent(name="healthy", model=healthy_model, tools=healthy_files.tools()[:1])),
    ]

    async def both() -> list[sdk.RunResult]:
        return list(await asyncio.gather(*(sdk.Runner.run(a, "Read", max_turns=30) for a in agents)))

    stuck_result, healthy_result = asyncio.run(both())
    stuck_summary, healthy_summary = guard.summary(stuck_result), guard.summary(healthy_result)
    assert stuck_summary is not None and healthy_summary is not None
    assert stuck_summary["run_id"] != healthy_summary["run_id"]
    assert stuck_summary["stop_reason"] == "repeated_call" and stuck_files.reads == ["a.txt"]
    assert healthy_summary["status"] == "completed" and healthy_summary["detectors"] == []
    assert len(healthy_files.reads) == 8 and healthy_result.final_output == "All parts read."


def test_a_handoff_to_a_wrapped_agent_gets_that_agent_its_own_guard_session(sdk: ModuleType) -> None:
    def triage(call: sdk.ModelCall) -> Any:
        return [sdk.function_call("transfer_to_reader", {}, call_id="t1")]

    files, script, guard = sdk.Files(), sdk.Script(sdk.stuck), sdk.LoopwardenGuard()
    reader = guard.wrap(sdk.Agent(name="reader", model=script.model(), tools=files.tools()[:1]))
    front = guard.wrap(
        sdk.Agent(name="triage", model=sdk.ScriptedModel([sdk.ModelStep.respond(triage)]), handoffs=[reader])
    )
    result = asyncio.run(sdk.Runner.run(front, "Summarise a.txt", max_turns=30))
    assert result.last_agent.name == "reader"
    assert files.reads == ["a.txt"] and script.seen[0].tools == ["read_file"]  # the reader's tools all offered
    summary = guard.summary(result)
    assert summary is not None and summary["stop_reason"] == "repeated_call", summary


def test_wrap_says_what_it_takes(sdk: ModuleType) -> None:
    with pytest.raises(TypeError, match=r"takes an agents\.Agent"):
        sdk.LoopwardenGuard().wrap("not an agent")  # type: ignore[arg-type]


def test_a_model_call_the_sdk_retries_keeps_the_guard_turn(sdk: ModuleType) -> None:
    from agents import ModelSettings
    from agents.retry import ModelRetrySettings

    calls = {"n": 0}

    def flaky(call: sdk.ModelCall) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionError("the connection dropped")
        if calls["n"] > 3:
            return [sdk.assistant_message("read")]
        return [sdk.function_call("read_file", {"path": f"{calls['n']}.txt"}, call_id=f"r{calls['n']}")]

    files, guard = sdk.Files(), sdk.LoopwardenGuard()
    settings = ModelSettings(retry=ModelRetrySettings(max_retries=2, policy=lambda context: True))
    model = sdk.ScriptedModel([sdk.ModelStep.respond(flaky) for _ in range(6)])
    agent = guard.wrap(sdk.Agent(name="r", model=model, tools=files.tools()[:1], model_settings=settings))
    result = asyncio.run(sdk.Runner.run(agent, "Read"))
    assert result.final_output == "read" and files.reads == ["1.txt", "3.txt"]
    summary = guard.summary(result)
    assert summary is not None and summary["status"] == "completed"
