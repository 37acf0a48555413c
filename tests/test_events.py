"""Events: one discriminated union, extras forbidden, class names that agree with their types."""

from __future__ import annotations

import json
import re
from typing import Literal, get_args

import pytest
from pydantic import TypeAdapter, ValidationError

from loopwarden import Agent, FunctionModel, call
from loopwarden.events import (
    RUNTIME_EVENTS,
    Event,
    EventParser,
    EventStamper,
    GuardVerdict,
    ModelCalled,
    RunFinished,
    RuntimeEvent,
    ToolCallFinished,
    UnknownEvent,
    VerdictAction,
    parse_event,
)
from loopwarden.models import ModelReply, ModelRequest
from loopwarden.report.events import REPORT_EVENTS, Milestone, parse_report_event
from loopwarden.tools import tool


def _camel(type_: str) -> str:
    return "".join(part.capitalize() for part in type_.split("_"))


@pytest.mark.parametrize("cls", [*RUNTIME_EVENTS, *REPORT_EVENTS], ids=lambda c: c.__name__)
def test_class_names_agree_with_type_strings(cls: type[Event]) -> None:
    assert cls.__name__ == _camel(cls.model_fields["type"].default)


def test_verdict_names_are_all_past_participles() -> None:
    assert all(re.fullmatch(r"[a-z]+ed", action) for action in get_args(VerdictAction))


def test_a_misspelt_or_missing_field_is_refused_when_stamped_built_or_read() -> None:
    stamp = EventStamper("r")
    with pytest.raises(ValidationError, match="cahced"):
        stamp(ToolCallFinished, turn=1, call_id="c", tool="t", ok=True, cahced=True)
    with pytest.raises(ValidationError, match="ok"):
        stamp(ToolCallFinished, turn=1, call_id="c", tool="t")
    with pytest.raises(ValidationError, match="cahced"):
        ToolCallFinished(run_id="r", seq=1, ts=0.0, turn=1, call_id="c", tool="t", ok=True, cahced=True)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="cahced"):
        parse_event({"type": "tool_call_finished", "run_id": "r", "seq": 1, "ts": 0.0, "turn": 1, "call_id": "c",
                     "tool": "t", "ok": True, "cahced": True})  # fmt: skip
    assert stamp(ToolCallFinished, turn=1, call_id="c", tool="t", ok=True, cached=True).cached


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"text of {path}"


def _loops(request: ModelRequest) -> ModelReply:
    return call("read", {"path": "a"})


def test_every_event_of_a_run_is_a_runtime_event_and_parses_back_to_its_class() -> None:
    result = Agent(FunctionModel(_loops), [read]).run_sync("x")
    adapter: TypeAdapter[Event] = TypeAdapter(RuntimeEvent)
    kinds = set()
    for event in result.events:
        data = json.loads(event.to_json())
        back = parse_event(data)
        assert type(back) is type(event) and back == event
        # built unchecked on the hot path (hotpath/trusted.py): what validation makes of it is the same, to the byte
        assert back.to_json() == event.to_json()
        assert type(adapter.validate_python(data)) is type(event)
        kinds.add(type(event))
    assert {ModelCalled, GuardVerdict, ToolCallFinished, RunFinished} <= kinds


def test_unknown_types_keep_every_field_whatever_modules_are_loaded() -> None:
    class Custom(Event):
        type: Literal["custom_thing"] = "custom_thing"
        n: int

    data = {"type": "custom_thing", "run_id": "r", "seq": 1, "ts": 0.0, "n": 3}
    back = parse_event(data)  # a subclass defined (imported) somewhere is not picked up by accident
    assert type(back) is UnknownEvent and back.model_dump() == data
    assert type(parse_event.with_classes([Custom])(data)) is Custom
    milestone = {"type": "milestone", "run_id": "r", "seq": 2, "ts": 0.0, "index": 1, "total": 3, "stage": "scan",
                 "state": "done"}  # fmt: skip
    assert type(parse_event(milestone)) is UnknownEvent  # report.events is imported, yet the runtime parser is fixed
    assert type(parse_report_event(milestone)) is Milestone


def test_a_known_type_with_a_wrong_value_is_an_error_not_a_plain_event() -> None:
    with pytest.raises(ValidationError):
        parse_event({"type": "model_called", "run_id": "r", "seq": 1, "ts": 0.0, "turn": "first"})


def test_an_event_class_needs_a_literal_type_of_its_own() -> None:
    with pytest.raises(TypeError):
        EventParser([ModelCalled, ModelCalled])
    with pytest.raises(TypeError):
        EventParser([Event])


def test_version_0_traces_read_under_todays_names() -> None:
    base = {"run_id": "r", "seq": 1, "ts": 0.0, "turn": 1}
    nudge = parse_event({**base, "type": "nudge", "detector": "cycle", "text": "stop"})
    verdict = parse_event({**base, "type": "guard_verdict", "detector": "guard", "action": "allow", "reason": "new"})
    routed = parse_event({"type": "intent_routed", "run_id": "r", "seq": 1, "ts": 0.0, "intent": "a",
                          "confidence": 1.0, "method": "rule", "step_cap": 4})  # fmt: skip
    assert nudge.type == "nudge_injected" and isinstance(verdict, GuardVerdict) and verdict.action == "allowed"
    assert routed.model_dump()["max_tool_rounds"] == 4


def test_a_trusted_build_names_a_misspelt_or_missing_field_as_validation_does() -> None:
    stamp = EventStamper("r")
    with pytest.raises(ValidationError, match="cahced"):
        stamp.trusted(ToolCallFinished, turn=1, call_id="c", tool="t", ok=True, cahced=True)
    with pytest.raises(ValidationError, match="ok"):
        stamp.trusted(ToolCallFinished, turn=1, call_id="c", tool="t")
    built = stamp.trusted(ToolCallFinished, turn=1, call_id="c", tool="t", ok=True)
    assert (
        built.checklist_done == []
        and built.checklist_done
        is not ToolCallFinished(run_id="r", seq=9, ts=0.0, turn=1, call_id="c", tool="t", ok=True).checklist_done
    )  # a fresh list per event, as the default factory makes
    assert built.seq == 3 and stamp.last_seq == 3  # the refused ones took their numbers too, as before
