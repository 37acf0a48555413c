"""The guard right in both directions (issue 13): each wrong of v0, reproduced with the public
API, and what the runtime does now. Healthy runs draw no intervention; loops are still caught."""

from __future__ import annotations

import json

from loopwarden import Agent, FunctionModel, LoopConfig, ModelReply, ModelRequest, ScriptedModel, call, tool
from loopwarden.events import GuardVerdict, PhaseEnded, RunFinished, ToolCallProposed
from loopwarden.guard.repetition import chant
from loopwarden.models import ToolCall
from loopwarden.tools import ToolResult

RUNS: list[str] = []


def interventions(events: list[object]) -> list[tuple[str, str]]:
    return [
        (e.detector, e.action)
        for e in events
        if isinstance(e, GuardVerdict) and e.action not in ("allowed", "cached") and e.detector != "no_tools_phase"
    ]


@tool
def check_host(host: str) -> str:
    """Health check of one host."""
    return "ok"


@tool
def search(query: str) -> str:
    """Search the manuals."""
    return "1 hit: doc-3 'Pump manual (2015)'"


@tool
def read_file(path: str, offset: int = 0, limit: int = 200) -> str:
    """Read a file."""
    RUNS.append(path)
    return {"a": "alpha config", "b": "beta tests", "c": "gamma notes"}.get(path, f"{path} from {offset}")


@tool(terminal=True)
def finish(summary: str) -> str:
    """Finish with a summary."""
    return summary


# 1. sweeps versus stagnation


def test_a_sweep_of_distinct_targets_with_the_same_answer_is_healthy() -> None:
    hosts = [call("check_host", {"host": f"web-{i:02d}"}) for i in range(1, 13)]
    result = Agent(ScriptedModel([*hosts, "all twelve healthy"]), [check_host]).run_sync("check the fleet")
    assert (result.status, result.stop_reason, result.output) == ("completed", "final_answer", "all twelve healthy")
    assert interventions(result.events) == [] and result.totals.tool_executions == 12


def test_the_same_question_rephrased_with_the_same_answer_is_stopped() -> None:
    queries = ["pump P-7 maintenance 2019", "P-7 maintenance report 2019", "maintenance report pump P-7 2019"]
    queries += ["2019 P-7 pump maintenance", "P-7 pump maintenance report", "report on P-7 maintenance 2019"]
    model = ScriptedModel([call("search", {"query": q}) for q in queries] + ["no report"] * 3)
    result = Agent(model, [search], config=LoopConfig(policy="fail")).run_sync("find the report")
    assert result.stop_reason == "no_progress"
    steps = [(v.turn, v.action) for v in result.events if isinstance(v, GuardVerdict) and v.detector == "no_progress"]
    assert steps[0] == (4, "nudged")


# 2. fingerprints of validated arguments


def test_the_same_call_written_four_ways_is_one_call() -> None:
    RUNS.clear()
    variants = [
        '{"path": "a"}',
        '{"path": "a", "offset": 0}',
        '{"offset": 0.0, "path": "a"}',
        '{"offset": "0", "path": "a"}',
    ]
    replies = [
        ModelReply(tool_calls=[ToolCall(id=f"c{i}", name="read_file", arguments=variants[i % 4])]) for i in range(5)
    ]
    result = Agent(ScriptedModel([*replies, "a holds alpha"]), [read_file]).run_sync("read a")
    assert result.stop_reason == "repeated_call" and RUNS == ["a"]
    assert result.totals.model_calls == 6  # 5 of the phase, 1 wrap-up
    proposed = [e for e in result.events if isinstance(e, ToolCallProposed)]
    assert {json.dumps(e.arguments, sort_keys=True) for e in proposed} == {'{"limit": 200, "offset": 0, "path": "a"}'}
    assert [e.raw_arguments for e in proposed[:4]] == variants  # what the model wrote, for the trace


# 3. a text reply is no answer while a terminal tool waits


def test_a_polite_monologue_is_not_accepted_while_the_finishing_tool_is_uncalled() -> None:
    talk = "I would be glad to help you with that. Let me think about the best way to approach this task."
    model = ScriptedModel([call("read_file", {"path": "a"}), *[talk] * 4, "a holds alpha"])
    result = Agent(model, [read_file, finish]).run_sync("summarise a")
    assert result.stop_reason == "monologue" and result.status == "degraded"
    assert ("monologue", "nudged") in interventions(result.events)


def test_reminded_once_the_model_finishes_with_the_tool() -> None:
    model = ScriptedModel(["I will read it now.", call("finish", {"summary": "done"})])
    result = Agent(model, [read_file, finish]).run_sync("summarise a")
    assert (result.status, result.stop_reason, result.output) == ("completed", "terminal_tool", "done")
    reminded = model.requests[1].messages[-1]
    assert reminded["role"] == "user" and "call finish" in reminded["content"]


# 4. chants without spaces, and what is not a chant


def test_chants_are_seen_at_the_character_level() -> None:
    for text in ("SELECT" * 40, "12345" * 60, "SELECT " * 40, "ab" * 30):
        assert chant(text) is not None, text
        result = Agent(ScriptedModel([text] * 3 + ["fine"]), [read_file]).run_sync("x")
        assert ("repetition", "nudged") in interventions(result.events)


def test_tables_code_and_long_numbers_are_not_chants() -> None:
    table = "| a | b |\n|---|---|\n" + "| 0 | 0 |\n" * 40
    code = "```\n" + "x = x + 1\n" * 40 + "```"
    for text in (table, code, "1" + "0" * 80, "3.14159265358979323846264338327950288419716939937510", "-" * 80):
        assert chant(text) is None, text


# 5. a healthy revisit


def test_a_revisit_with_new_reasoning_draws_no_intervention() -> None:
    script = "ababcabab"

    def reply(request: ModelRequest) -> ModelReply | str:
        n = sum(1 for m in request.messages if m["role"] == "tool")
        if n >= len(script):
            return "The config is stale; the tests are right."
        note = f"Step {'abcdefghi'[n]}: comparing {script[n]} against note {'xyzuvwpqr'[n]}."
        return ModelReply(text=note, tool_calls=[call("read_file", {"path": script[n]})])

    result = Agent(FunctionModel(reply), [read_file]).run_sync("compare a and b")
    assert result.status == "completed" and interventions(result.events) == []
    assert result.totals.tool_executions == 3  # identical reads still answered from the cache


# 6. a wrap-up that only calls tools


def test_a_wrap_up_of_tool_calls_is_asked_again_then_assembled() -> None:
    model = FunctionModel(lambda request: call("read_file", {"path": "a"}))
    result = Agent(model, [read_file]).run_sync("read a")
    finished = result.events[-1]
    assert isinstance(finished, RunFinished) and finished.assembled
    assert result.output.startswith("[No answer from the model") and "alpha config" in result.output
    second_ask = model.requests[-1]
    assert second_ask.tool_choice == "none" and second_ask.tools  # tools shown, calls not allowed


# 7. attribution


def test_every_detector_that_stepped_in_is_named_in_order() -> None:
    @tool
    def push() -> ToolResult:
        """Push the branch."""
        return ToolResult.failure("exit_128", "fatal: could not read Username")

    result = Agent(ScriptedModel([call("push", {})] * 6 + ["push failed"]), [push]).run_sync("push")
    ended = next(e for e in result.events if isinstance(e, PhaseEnded))
    assert ended.stop_reason == "repeated_call" and ended.detectors == ["error_loop", "repeated_call"]
    assert result.events[-1].detectors == ["error_loop", "repeated_call"]  # type: ignore[attr-defined]


def test_identical_calls_in_one_turn_run_once() -> None:
    RUNS.clear()
    batch = ModelReply(tool_calls=[ToolCall(id=f"p{i}", name="read_file", arguments='{"path": "c"}') for i in range(3)])
    result = Agent(ScriptedModel([batch, "gamma"]), [read_file]).run_sync("read c")
    assert RUNS == ["c"] and result.output == "gamma"
    verdicts = [e.action for e in result.events if isinstance(e, GuardVerdict) and e.detector != "no_tools_phase"]
    assert verdicts[:3] == ["allowed", "cached", "nudged"]


async def test_a_streamed_reply_is_cut_where_it_begins_to_chant() -> None:
    chanting = "Here is the plan. " + "SELECT " * 2000  # streamed word by word, as a client would
    agent = Agent(ScriptedModel([chanting, "The plan is short."]), [read_file])
    stream = agent.stream_text("plan it")
    received = "".join([delta async for delta in stream])
    first = next(e for e in stream.result.events if e.type == "model_called")
    assert first.text is not None and len(first.text) < 1000  # cut early, not 12,000 characters later
    assert ("repetition", "nudged") in interventions(stream.result.events)
    assert len(received) < len(chanting) + 100 and stream.result.output == "The plan is short."
