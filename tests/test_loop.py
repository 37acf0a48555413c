"""The guarded loop end to end with scripted models (issue 2's must-show cases)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from eventcheck import of_type, verdicts
from loopwarden import Agent, Budgets, FunctionModel, Ladder, LoopConfig, ModelRequest, ScriptedModel, call, tool
from loopwarden.events import (
    ModelCalled,
    PhaseEnded,
    RunFinished,
    ToolCallFinished,
    parse_event,
)
from loopwarden.guard import Price
from loopwarden.models import ModelError, ToolCall, Usage

FILES = {"a.txt": "alpha", "b.txt": "\n".join(f"line {i}" for i in range(100))}


@tool
def read_file(path: str, offset: int = 0, limit: int = 10) -> str:
    """Read lines of a file.

    Args:
        path: file name
        offset: first line
        limit: number of lines
    """
    lines = FILES[path].splitlines()
    return "\n".join(lines[offset : offset + limit])


def always_read_a(request: ModelRequest) -> ToolCall:
    """The seed's collapsed model: the same call, whatever it is offered or told."""
    return call("read_file", {"path": "a.txt"})


def tool_results(request: ModelRequest) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request.messages if m["role"] == "tool"]


# -- the collapse breaker ---------------------------------------------------------------------------


def test_seed_collapse_is_stopped_with_the_exact_ladder() -> None:
    model = FunctionModel(always_read_a)
    result = Agent(model, [read_file], config=LoopConfig(policy="fail")).run_sync("summarise a.txt")
    assert verdicts(result.events) == ["allowed", "cached", "nudged", "narrowed", "stopped"]
    assert result.stop_reason == "repeated_call"
    assert result.status == "failed"
    assert model.calls == 5
    assert result.totals.tool_executions == 1
    assert result.totals.duplicates_avoided == 3
    phase = of_type(result.events, "phase_ended")
    assert len(phase) == 1 and isinstance(phase[0], PhaseEnded) and phase[0].policy == "fail"


def test_seed_collapse_under_degrade_asks_once_without_tools() -> None:
    model = FunctionModel(lambda r: call("read_file", {"path": "a.txt"}) if r.tools else "alpha is the content")
    config = LoopConfig(policy="degrade", ladder=Ladder(nudge_at=3, narrow_at=5, stop_at=5))
    result = Agent(model, [read_file], config=config).run_sync("summarise a.txt")
    assert verdicts(result.events) == ["allowed", "cached", "nudged", "cached", "stopped"]
    assert model.calls == 6
    assert model.requests[-1].tools == []
    assert result.status == "degraded" and result.stop_reason == "repeated_call"
    assert result.output == "alpha is the content"


def test_narrowing_drops_the_repeated_tool_and_the_nudge_is_sent_once() -> None:
    model = FunctionModel(always_read_a)
    result = Agent(model, [read_file], config=LoopConfig(policy="fail")).run_sync("x")
    offered = [e.tools_offered for e in result.events if isinstance(e, ModelCalled)]
    assert offered[:4] == [["read_file"]] * 4
    assert offered[4] == []  # narrowed after the 4th identical call
    nudges = [m for m in result.messages if m["role"] == "user" and "repeating" in (m["content"] or "")]
    assert len(nudges) == 1


def test_narrowing_forces_the_terminal_tool_when_the_phase_has_one() -> None:
    @tool(terminal=True)
    def finish(summary: str) -> dict[str, str]:
        """Finish with a summary."""
        return {"summary": summary}

    def model_fn(request: ModelRequest) -> ToolCall:
        if isinstance(request.tool_choice, dict):
            return call("finish", {"summary": "alpha"})
        return call("read_file", {"path": "a.txt"})

    result = Agent(FunctionModel(model_fn), [read_file, finish]).run_sync("x")
    assert result.stop_reason == "terminal_tool" and result.status == "completed"
    assert result.output == {"summary": "alpha"}
    assert verdicts(result.events) == ["allowed", "cached", "nudged", "narrowed", "allowed"]


def test_segmented_reads_are_never_flagged() -> None:
    def reader(request: ModelRequest) -> ToolCall | str:
        n = len(tool_results(request))
        return call("read_file", {"path": "b.txt", "offset": 10 * n, "limit": 10}) if n < 10 else "read it all"

    result = Agent(FunctionModel(reader), [read_file]).run_sync("read b.txt")
    assert set(verdicts(result.events)) == {"allowed"}
    assert result.status == "completed" and result.totals.tool_executions == 10


def test_repeatable_polling_tool_called_six_times_is_allowed() -> None:
    state = {"n": 0}

    @tool(repeatable=True)
    def job_status(job_id: str) -> dict[str, str]:
        """Poll a job."""
        state["n"] += 1
        return {"state": "done" if state["n"] >= 6 else "running"}

    def poller(request: ModelRequest) -> ToolCall | str:
        results = tool_results(request)
        if results and results[-1]["data"]["state"] == "done":
            return "the job finished"
        return call("job_status", {"job_id": "j1"})

    result = Agent(FunctionModel(poller), [job_status]).run_sync("wait for j1")
    assert verdicts(result.events) == ["allowed"] * 6
    assert result.output == "the job finished" and state["n"] == 6


# -- bad input becomes structured results ------------------------------------------------------------


def _results(result_events: list[Any]) -> list[ToolCallFinished]:
    return [e for e in result_events if isinstance(e, ToolCallFinished)]


def test_a_raising_tool_becomes_a_result_and_the_run_goes_on() -> None:
    @tool
    def explode(x: int) -> int:
        """Always fails."""
        raise RuntimeError(f"boom {x}")

    model = ScriptedModel([call("explode", {"x": 1}), "recovered"])
    result = Agent(model, [explode]).run_sync("x")
    [event] = _results(result.events)
    assert not event.ok and event.error_type == "exception" and "boom 1" in (event.message or "")
    assert json.loads(model.requests[1].messages[-1]["content"])["error_type"] == "exception"
    assert result.status == "completed" and result.output == "recovered"


def test_success_false_in_data_is_a_failure_the_model_sees() -> None:
    @tool
    def charge(amount: int) -> dict[str, Any]:
        """Charge a card."""
        return {"success": False, "code": "card_declined", "message": "declined"}

    model = ScriptedModel([call("charge", {"amount": 5}), "the card was declined"])
    result = Agent(model, [charge]).run_sync("x")
    [event] = _results(result.events)
    assert not event.ok and event.error_type == "card_declined"
    seen = json.loads(model.requests[1].messages[-1]["content"])
    assert seen["ok"] is False and seen["error_type"] == "card_declined"


def test_unknown_tool_is_refused_with_the_available_names() -> None:
    model = ScriptedModel([call("delete_everything", {}), "ok"])
    result = Agent(model, [read_file]).run_sync("x")
    [event] = _results(result.events)
    assert event.error_type == "unknown_tool" and not event.executed
    assert "read_file" in (event.message or "")
    assert verdicts(result.events) == ["refused"]
    assert result.status == "completed"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"path": "a.txt"', "not valid JSON"),
        ('{"path": 42}', "argument 'path'"),
        ('{"pth": "a.txt"}', "argument 'path': Field required"),
        ('{"path": "a.txt", "offset": "ten"}', "argument 'offset'"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_bad_arguments_are_structured_results(raw: str, expected: str) -> None:
    model = ScriptedModel([ToolCall(id="c1", name="read_file", arguments=raw), "fixed"])
    result = Agent(model, [read_file]).run_sync("x")
    [event] = _results(result.events)
    assert event.error_type == "invalid_arguments" and not event.executed
    assert expected in (event.message or "")
    assert result.status == "completed"


def test_model_error_ends_the_run_with_an_event() -> None:
    model = ScriptedModel([ModelError("rate_limited", "429 after 3 tries", retryable=True)])
    result = Agent(model, [read_file]).run_sync("x")
    [failed] = of_type(result.events, "model_failed")
    assert failed.kind == "rate_limited"  # type: ignore[attr-defined]
    assert result.status == "degraded" and result.stop_reason == "model_error"
    assert isinstance(result.events[-1], RunFinished)


def test_parallel_calls_return_in_proposal_order() -> None:
    @tool
    async def slow_echo(text: str, delay: float) -> str:
        """Echo after a delay."""
        await asyncio.sleep(delay)
        return text

    calls = [call("slow_echo", {"text": t, "delay": d}) for t, d in (("first", 0.05), ("second", 0.0))]
    model = ScriptedModel([calls, "done"])
    result = Agent(model, [slow_echo]).run_sync("x")
    tool_messages = [m for m in model.requests[1].messages if m["role"] == "tool"]
    assert [json.loads(m["content"])["data"] for m in tool_messages] == ["first", "second"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in model.requests[1].messages[-3]["tool_calls"]]
    assert result.totals.tool_executions == 2


# -- budgets ----------------------------------------------------------------------------------------


def distinct_reads(request: ModelRequest) -> ToolCall:
    n = len(tool_results(request))
    return call("read_file", {"path": "b.txt", "offset": n})


@pytest.mark.parametrize(
    ("budgets", "reason"),
    [
        (Budgets(max_tool_rounds=3), "tool_round_budget"),
        (Budgets(max_model_calls=4), "model_call_budget"),
        (Budgets(max_tokens=45), "token_budget"),
        (Budgets(max_cost=0.0001, prices={"function": Price(input=1.0, output=1.0)}), "cost_budget"),
    ],
)
def test_each_budget_stops_with_its_own_reason(budgets: Budgets, reason: str) -> None:
    model = FunctionModel(distinct_reads, usage=Usage(prompt_tokens=10, completion_tokens=5))
    result = Agent(model, [read_file], config=LoopConfig(budgets=budgets, policy="fail")).run_sync("x")
    assert result.stop_reason == reason and result.status == "failed"
    assert set(verdicts(result.events)) == {"allowed"}


def test_tool_round_budget_under_degrade_asks_for_an_answer() -> None:
    model = FunctionModel(lambda r: distinct_reads(r) if r.tools else "partial answer")
    result = Agent(model, [read_file], config=LoopConfig(budgets=Budgets(max_tool_rounds=2))).run_sync("x")
    assert result.stop_reason == "tool_round_budget" and result.status == "degraded"
    assert result.output == "partial answer" and result.totals.tool_rounds == 2


def test_hard_budget_under_degrade_makes_no_further_call() -> None:
    model = FunctionModel(distinct_reads)
    result = Agent(model, [read_file], config=LoopConfig(budgets=Budgets(max_model_calls=2))).run_sync("x")
    assert result.stop_reason == "model_call_budget" and model.calls == 2 and result.output is None


def test_wall_clock_budget_cuts_a_hanging_model_call() -> None:
    async def hang(request: ModelRequest) -> str:
        await asyncio.sleep(30)
        return "never"

    config = LoopConfig(budgets=Budgets(max_seconds=0.2))
    result = Agent(FunctionModel(hang), [read_file], config=config).run_sync("x")
    assert result.stop_reason == "time_budget" and result.totals.duration_s < 5


# -- events --------------------------------------------------------------------------------------------


def test_events_are_numbered_serialisable_and_parse_back() -> None:
    result = Agent(FunctionModel(always_read_a), [read_file]).run_sync("x", run_id="run-1")
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    assert {e.run_id for e in result.events} == {"run-1"}
    assert result.events[0].type == "run_started" and result.events[-1].type == "run_finished"
    for event in result.events:
        back = parse_event(json.loads(event.to_json()))
        assert type(back) is type(event) and back == event
    finished = result.events[-1]
    # 5 calls of the phase; asked for the answer it calls again, asked once more with
    # tool_choice="none" it still calls: the answer is assembled from what was gathered.
    assert isinstance(finished, RunFinished) and finished.totals.model_calls == 7
    assert finished.assembled and "alpha" in finished.output


async def test_stream_yields_events_as_they_happen() -> None:
    seen: list[str] = []
    async for event in Agent(ScriptedModel([call("read_file", {"path": "a.txt"}), "done"]), [read_file]).stream("x"):
        seen.append(event.type)
        if event.type == "tool_call_finished":
            assert "run_finished" not in seen
    assert seen[0] == "run_started" and seen[-1] == "run_finished"


def test_results_flow_back_to_the_model_as_tool_messages() -> None:
    model = ScriptedModel([call("read_file", {"path": "a.txt"}), "done"])
    Agent(model, [read_file], system="be brief").run_sync("x")
    messages = model.requests[1].messages
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[2]["role"] == "assistant" and messages[2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert messages[3]["role"] == "tool" and messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]
    assert json.loads(messages[3]["content"]) == {"ok": True, "data": "alpha"}


def test_a_run_result_repr_stays_short_however_long_the_run() -> None:
    # asyncio.run() formats its main task's repr (result included) on Python 3.11: it must not
    # render every event and message of a long run.
    @tool
    def read(part: int) -> str:
        """Read one part."""
        return f"part {part}: " + "x" * 200

    model = ScriptedModel([call("read", {"part": n}) for n in range(60)] + ["done"])
    config = LoopConfig(budgets=Budgets(max_tool_rounds=100, max_model_calls=100))
    result = Agent(model, [read], config=config).run_sync("read")
    assert result.status == "completed" and len(result.events) > 200
    text = repr(result)
    assert result.run_id in text and f"events=<{len(result.events)}>" in text and len(text) < 300
