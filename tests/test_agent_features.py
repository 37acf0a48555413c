"""What a user of pydantic-ai or the Agents SDK expects of an Agent: typed output, typed deps for
tools, streamed text, closing, run_sync under a running loop, handoff to another agent."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

from loopwarden import Agent, FunctionModel, OutputValidationError, RunContext, ScriptedModel, call, handoff, tool
from loopwarden.events import GuardVerdict, HandedOff, PhaseEnded, RunFinished, RunStarted, ToolCallFinished
from loopwarden.models import ModelReply, ModelRequest


class Answer(BaseModel):
    city: str
    temperature: float


# -- typed output ----------------------------------------------------------------------------------


def test_output_type_gives_the_validated_object_and_tells_the_model_the_schema() -> None:
    model = ScriptedModel(['```json\n{"city": "Oslo", "temperature": 11.5}\n```'])
    result = Agent(model, [], output_type=Answer).run_sync("weather in Oslo?")
    assert result.output == Answer(city="Oslo", temperature=11.5) and isinstance(result.output, Answer)
    assert result.raw_output == {"city": "Oslo", "temperature": 11.5}  # the run_finished event holds its JSON
    system = [m["content"] for m in model.requests[0].messages if m["role"] == "system"]
    assert any('"temperature"' in text and "Answer" in text for text in system)


def test_an_invalid_answer_goes_back_with_the_errors_then_validates() -> None:
    model = ScriptedModel(
        ['{"city": "Oslo"}', '{"city": "Oslo", "temperature": "eleven"}', '{"city": "Oslo", "temperature": 11}']
    )
    result = Agent(model, [], output_type=Answer).run_sync("weather?")
    assert result.output.temperature == 11.0 and result.status == "completed"
    refusals = [e.reason for e in result.events if isinstance(e, GuardVerdict) and e.action == "refused"]
    assert len(refusals) == 2 and "temperature" in refusals[0]
    assert "temperature" in model.requests[1].messages[-1]["content"]


def test_no_valid_output_is_an_error_when_read_not_a_wrong_object() -> None:
    result = Agent(ScriptedModel(["sunny"] * 5), [], output_type=Answer).run_sync("weather?")
    assert result.status == "failed" and result.stop_reason == "verifier_failed"
    with pytest.raises(OutputValidationError, match="verifier_failed"):
        _ = result.output


def test_a_terminal_tools_output_is_validated_as_the_output() -> None:
    @tool(terminal=True)
    def report(city: str, temperature: float) -> dict[str, object]:
        """Report the weather."""
        return {"city": city, "temperature": temperature}

    model = ScriptedModel([call("report", {"city": "Bergen", "temperature": 9})])
    assert Agent(model, [report], output_type=Answer).run_sync("x").output == Answer(city="Bergen", temperature=9)


def test_without_output_type_the_output_is_the_text() -> None:
    result = Agent(ScriptedModel(["plain words"]), []).run_sync("x")
    assert result.output == result.raw_output == "plain words"


def test_the_output_is_the_same_after_a_pickle_or_a_copy() -> None:
    """A result sent to another process or copied keeps its output: the text, the typed value,
    and for a run that ended without a valid one, the error when read."""
    untyped = Agent(ScriptedModel(["plain words"]), []).run_sync("x")
    typed = Agent(ScriptedModel(['{"city": "Oslo", "temperature": 11}']), [], output_type=Answer).run_sync("x")
    invalid = Agent(ScriptedModel(["sunny"] * 5), [], output_type=Answer).run_sync("weather?")
    for copy_of in (lambda r: pickle.loads(pickle.dumps(r)), copy.deepcopy, copy.copy):
        assert copy_of(untyped).output == "plain words"
        assert copy_of(typed).output == Answer(city="Oslo", temperature=11)
        with pytest.raises(OutputValidationError, match="verifier_failed"):
            _ = copy_of(invalid).output


# -- deps ------------------------------------------------------------------------------------------


@dataclass
class Deps:
    unit: str
    readings: dict[str, float]


@tool
def temperature(ctx: RunContext[Deps], city: str) -> str:
    """The temperature in a city.

    Args:
        city: the city's name
    """
    return f"{ctx.deps.readings[city]} {ctx.deps.unit} (run {ctx.run_id}, turn {ctx.turn})"


@tool
async def unit(ctx: RunContext[Deps]) -> str:
    """The unit readings are in."""
    return ctx.deps.unit


def test_tools_get_typed_deps_that_the_model_never_sees() -> None:
    assert set(temperature.parameters["properties"]) == {"city"}
    assert "ctx" not in json.dumps(temperature.openai_schema())
    model = ScriptedModel([[call("temperature", {"city": "Oslo"}), call("unit")], "done"])
    agent = Agent(model, [temperature, unit], deps_type=Deps)
    result = agent.run_sync("x", deps=Deps("C", {"Oslo": 11.0}), run_id="r1")
    data = [e.preview for e in result.events if isinstance(e, ToolCallFinished)]
    assert "11.0 C (run r1, turn 1)" in data[0] and data[1] == json.dumps({"ok": True, "data": "C"})


def test_the_model_cannot_pass_the_context_itself() -> None:
    model = ScriptedModel([call("temperature", {"city": "Oslo", "ctx": "mine"}), "done"])
    result = Agent(model, [temperature], deps_type=Deps).run_sync("x", deps=Deps("C", {"Oslo": 1.0}))
    finished = next(e for e in result.events if isinstance(e, ToolCallFinished))
    assert not finished.ok and finished.error_type == "invalid_arguments"


def test_deps_of_the_wrong_type_are_refused_before_the_run() -> None:
    from loopwarden import ConfigError

    with pytest.raises(ConfigError, match="deps_type is Deps"):
        Agent(ScriptedModel(["x"]), [temperature], deps_type=Deps).run_sync("x", deps={"unit": "C"})  # type: ignore[arg-type]


# -- streaming -------------------------------------------------------------------------------------


async def test_stream_text_yields_deltas_and_the_guard_sees_whole_replies() -> None:
    chant = "I will check the file now. " * 5
    model = ScriptedModel([chant, "The answer is 42, from the table."])
    stream = Agent(model, [read_file]).stream_text("x")
    deltas = [delta async for delta in stream]
    assert len(deltas) > 10 and "".join(deltas) == chant + "The answer is 42, from the table."
    assert stream.result is not None and stream.result.output == "The answer is 42, from the table."
    repetition = [e for e in stream.result.events if isinstance(e, GuardVerdict) and e.detector == "repetition"]
    assert repetition and repetition[0].action == "nudged"  # the detector read the assembled chant


async def test_a_run_that_raises_raises_through_the_text_stream() -> None:
    def broken(request: ModelRequest) -> ModelReply:
        raise RuntimeError("the model broke")

    with pytest.raises(RuntimeError, match="the model broke"):
        async for _ in Agent(FunctionModel(broken), []).stream_text("x"):
            pass


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "text"


# -- closing, run_sync in a loop -------------------------------------------------------------------


class ClosingModel(ScriptedModel):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_async_with_closes_the_models_of_the_agent_and_its_handoff_targets() -> None:
    inner, outer = ClosingModel(["bye"]), ClosingModel(["hi"])
    target = Agent(inner, [])
    async with Agent(outer, [handoff(target, name="transfer")]) as agent:
        assert (await agent.run("x")).output == "hi"
    assert (outer.closed, inner.closed) == (1, 1)


async def test_run_sync_works_inside_a_running_event_loop() -> None:
    asyncio.get_running_loop()  # as in a notebook
    result = Agent(ScriptedModel(["from a worker thread"]), []).run_sync("x")
    assert result.output == "from a worker thread"


# -- handoff ---------------------------------------------------------------------------------------


def test_a_handoff_gives_the_conversation_to_another_agent_with_its_own_tools_and_guard() -> None:
    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    billing_model = ScriptedModel([call("refund", {"order": "A1"}), call("refund", {"order": "A1"}), "Refunded A1."])
    billing = Agent(billing_model, [refund], system="You handle billing.")
    triage_model = ScriptedModel([call("read_file", {"path": "a"}), call("transfer_to_billing", {"reason": "refund"})])
    triage = Agent(triage_model, [read_file, handoff(billing, name="transfer_to_billing")], system="You triage.")
    result = triage.run_sync("refund order A1", run_id="h1")

    assert result.status == "completed" and result.output == "Refunded A1."
    assert [type(e) for e in result.events].count(RunStarted) == 1 and isinstance(result.events[-1], RunFinished)
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    handed = next(e for e in result.events if isinstance(e, HandedOff))
    assert handed.tool == "transfer_to_billing" and handed.tools == ["refund"] and handed.reason == "refund"
    assert any(isinstance(e, PhaseEnded) and e.stop_reason == "handoff" for e in result.events)
    sent = billing_model.requests[0]
    assert sent.messages[0] == {"role": "system", "content": "You handle billing."}
    assert "You triage." not in json.dumps(sent.messages) and "refund order A1" in json.dumps(sent.messages)
    assert [t["function"]["name"] for t in sent.tools] == ["refund"]
    # its own guard state: the billing agent's repeat is cached on its first repeat, counted from zero
    verdicts = [e.action for e in result.events if isinstance(e, GuardVerdict) and e.seq > handed.seq]
    assert verdicts == ["allowed", "cached"]
    assert result.totals.model_calls == 5 and result.totals.tool_executions == 3


# -- streaming through the OpenAI-compatible client, over real HTTP ----------------------------------


async def test_stream_text_through_the_openai_client_streams_from_a_non_streaming_config() -> None:
    from loopwarden.models.config import EndpointConfig
    from loopwarden.models.openai_compat import OpenAICompatModel
    from openai_server import ScriptedServer, stream

    with ScriptedServer() as server:
        chant = "Let me look at that. " * 4
        server.push(stream(chant, pieces=8), stream("It is 42.", pieces=3))
        config = EndpointConfig(base_url=server.base_url, cheap_model="m", main_model="m", stream=False, timeout=5)
        model = OpenAICompatModel(config)
        async with Agent(model, [read_file]) as agent:
            text = agent.stream_text("x")
            deltas = [delta async for delta in text]
    assert all(body.get("stream") is True for body in server.requests)  # on_text turned streaming on
    assert len(deltas) >= 9 and "".join(deltas) == chant + "It is 42."
    assert text.result is not None and text.result.output == "It is 42."
    verdicts = [e for e in text.result.events if isinstance(e, GuardVerdict) and e.detector == "repetition"]
    assert verdicts and verdicts[0].action == "nudged"  # the whole reply reached the detector


def test_a_traced_run_keeps_the_handed_to_agents_model_exchanges(tmp_path: Path) -> None:
    from loopwarden.trace.exchanges import load_exchanges
    from loopwarden.trace.store import RunStore

    billing = Agent(ScriptedModel(["Refunded."], name="billing-model"), [])
    triage = Agent(ScriptedModel([call("to_billing")], name="triage-model"), [handoff(billing, name="to_billing")])
    store = RunStore(tmp_path / "runs.db")
    result = Agent(triage.model, triage.tools, trace=store).run_sync("refund", run_id="t1")
    assert result.output == "Refunded."
    offered = [[t["function"]["name"] for t in x.request.tools] for x in load_exchanges(store, "t1")]
    assert offered == [["to_billing"], []]  # the triage call, then the billing agent's (no tools)
    assert [e.type for e in store.events("t1")] == [e.type for e in result.events]
