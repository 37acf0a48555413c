"""A run of another framework under its adapter is a loopwarden run in the run store: `loopwarden
trace show` reads it, `loopwarden eval-import` turns it into a case, and that case replayed by
loopwarden's own runtime makes the same decision after as many model calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from helpers import close_default_loop
from loopwarden.cli import build_app
from loopwarden.eval.case import load_case
from loopwarden.eval.runner import run_case


def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: the file name
    """
    return f"contents of {path}"


def pydantic_ai_run(db: Path) -> tuple[dict[str, Any] | None, int]:
    pytest.importorskip("pydantic_ai.capabilities")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from loopwarden.adapters.pydantic_ai import Loopwarden

    calls: list[int] = []

    def stuck(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "a.txt"}, tool_call_id=f"c{len(calls)}")])

    guard = Loopwarden(trace=db)
    result = Agent(FunctionModel(stuck), tools=[read_file], capabilities=[guard]).run_sync("Summarise a.txt")
    close_default_loop()  # before the replay's asyncio.run() orphans it
    return guard.summary(result), len(calls)


def openai_agents_run(db: Path) -> tuple[dict[str, Any] | None, int]:
    pytest.importorskip("agents.models._run_context")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.testing import ModelCall, ModelStep, ScriptedModel, function_call

    from loopwarden.adapters.openai_agents import LoopwardenGuard

    set_tracing_disabled(True)
    calls: list[int] = []

    def stuck(call: ModelCall) -> Any:
        calls.append(1)
        return [function_call("read_file", {"path": "a.txt"}, call_id=f"c{len(calls)}")]

    guard = LoopwardenGuard(trace=db)
    model = ScriptedModel([ModelStep.respond(stuck) for _ in range(20)])
    agent = guard.wrap(Agent(name="reader", model=model, tools=[function_tool(read_file)]))
    return guard.summary(asyncio.run(Runner.run(agent, "Summarise a.txt"))), len(calls)


RUNS: dict[str, Callable[[Path], tuple[dict[str, Any] | None, int]]] = {
    "PydanticAI": pydantic_ai_run,
    "OpenAI Agents SDK": openai_agents_run,
}


@pytest.mark.parametrize("framework", list(RUNS))
def test_a_guarded_run_is_traced_imported_and_replayed_to_the_same_decision(framework: str, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    summary, calls = RUNS[framework](db)
    assert summary is not None and summary["stop_reason"] == "repeated_call"
    app, cli = build_app(), CliRunner()
    shown = cli.invoke(app, ["trace", "show", summary["run_id"], "--db", str(db)])
    assert shown.exit_code == 0 and "repeated_call" in shown.output, shown.output

    case = tmp_path / "cases" / "stuck.yaml"
    case.parent.mkdir()
    imported = cli.invoke(app, ["eval-import", summary["run_id"], "--db", str(db), "-o", str(case)])
    assert imported.exit_code == 0, imported.output
    replayed = asyncio.run(run_case(load_case(case)))
    assert not any(r.startswith("crashed") for r in replayed.reasons), replayed.reasons
    assert (replayed.stop_reason, replayed.model_calls, replayed.tool_executions) == ("repeated_call", calls, 1)
