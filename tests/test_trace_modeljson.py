"""Events' JSON for the store by orjson (trace/modeljson.py): the bytes `Event.to_json()` writes,
or None so that pydantic writes them; and a traced run's stored lines are each event's
`to_json()` with orjson and without it."""

from __future__ import annotations

import datetime
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import computed_field, field_serializer

from loopwarden.events import (
    Event,
    GuardVerdict,
    ModelCalled,
    ModelFailed,
    RunFinished,
    ToolCallFinished,
    ToolCallProposed,
    Totals,
    UnknownEvent,
)
from loopwarden.models.base import ClientNote, Usage
from loopwarden.trace import modeljson
from loopwarden.trace.modeljson import model_json, shape
from loopwarden.trace.rows import event_lines
from loopwarden.trace.store import RunStore
from trace_fixtures import collapsing_agent

orjson = pytest.importorskip("orjson")

ODD = "".join(map(chr, range(32))) + '"\\/\u2028\u2029\x7f\ud7ff\ue000 é 漢 🙂'
HEAD = {"run_id": "r" * 32, "seq": 7, "ts": 1_764_676_543.1033506}


def _finished(**fields: Any) -> ToolCallFinished:
    values = {"type": "tool_call_finished", **HEAD, "turn": 3, "call_id": "c1", "tool": "read", "ok": True}
    return ToolCallFinished.model_construct(**{**values, **fields})


def _same(event: Event) -> bytes | None:
    """model_json's bytes, checked to be to_json()'s, or None."""
    data = model_json(event)
    assert data is None or data.decode() == event.to_json(), (data, event.to_json())
    return data


def test_the_runtimes_events_with_odd_text_are_written_as_pydantic_writes_them() -> None:
    note = ClientNote(kind="retry", message=ODD, status=429, delay=0.25)
    events: list[Event] = [
        ModelCalled(
            **HEAD,
            turn=1,
            model=ODD,
            tools_offered=[ODD, "b"],
            n_tools_offered=2,
            tool_choice={"x": [ODD]},
            usage=Usage(prompt_tokens=2**40, completion_tokens=3),
            text=ODD,
            notes=[note],
            attempts=2,
        ),
        ToolCallProposed(
            **HEAD,
            turn=1,
            call_id="c",
            tool="t",
            arguments={"a": [1, 2.5, None, True, ODD], ODD: {}},
            args_hash="h",
            raw_arguments=ODD,
        ),
        GuardVerdict(**HEAD, turn=1, detector="d", action="nudged", reason=ODD, count=None, evidence=[ODD, ""]),
        ModelFailed(**HEAD, turn=2, kind="k", message=ODD, status=None),
        RunFinished(**HEAD, status="completed", stop_reason="done", output={"o": ODD}, totals=Totals(cost=0.125)),
        _finished(preview=ODD * 20, duration_ms=12.5, checklist_done=[ODD]),
    ]
    for event in events:
        assert _same(event) is not None, type(event).__name__


def test_floats_of_every_size_are_written_with_pydantics_digits() -> None:
    rng = random.Random(17)
    values = [0.0, -0.0, 1.0, 1e16, 1e-5, 1.5e-05, 5e-324, 1.7976931348623157e308, 0.1 + 0.2]
    values += [rng.uniform(-1, 1) * 10 ** rng.uniform(-30, 30) for _ in range(2000)]
    for value in values:
        assert _same(_finished(ts=value, duration_ms=value)) is not None, value
    for value in (math.inf, -math.inf, math.nan):  # pydantic writes null, as orjson does
        assert _same(_finished(duration_ms=value)) == _finished(duration_ms=value).to_json().encode()


@pytest.mark.parametrize(
    "fields",
    [
        {"duration_ms": 3},  # an int where a float is declared: pydantic writes 3.0
        {"ts": True},
        {"attempts": 2**64},  # more than orjson's 64 bits
        {"preview": "\ud800"},  # not UTF-8: pydantic raises, as it did
        {"message": type("Text", (str,), {})("a subclass of str")},
        {"checklist_done": (x for x in ())},
    ],
)
def test_values_orjson_would_write_otherwise_are_left_to_pydantic(fields: dict[str, Any]) -> None:
    assert model_json(_finished(**fields)) is None


def test_any_field_values_of_other_types_are_left_to_pydantic() -> None:
    moment = datetime.datetime(2026, 12, 3, 7, 30, tzinfo=datetime.UTC)
    for arguments in ({"when": moment}, {"raw": b"bytes"}, {1: "an int key"}, {"s": {1, 2}}, {"t": (1, "x")}):
        event = ToolCallProposed(**HEAD, turn=1, call_id="c", tool="t", arguments=arguments, args_hash="h")
        data = _same(event)
        assert data is None or isinstance(arguments["t"], tuple)  # a tuple is a list to both


def test_a_model_in_a_field_must_be_plain_and_hold_floats_where_declared() -> None:
    class Counted(Usage):
        extra_count: int = 1

    def called(usage: Any, notes: list[Any]) -> ModelCalled:
        return ModelCalled(**HEAD, turn=1, model="m", tools_offered=[], n_tools_offered=0, usage=usage, notes=notes)

    assert _same(called(Usage(), [])) is not None
    assert _same(called(Usage(), [ClientNote.model_construct(kind="k", message="m", status=None, delay=1)])) is None
    counted = Counted.model_construct(prompt_tokens=1, completion_tokens=2, cached_tokens=0, extra_count=3)
    assert _same(called(counted, [])) is None  # pydantic writes the fields of the declared Usage only
    assert _same(RunFinished(**HEAD, status="failed", stop_reason="x", totals=Totals.model_construct(cost=1))) is None


def test_classes_whose_json_is_not_their_fields_alone_are_never_written_here() -> None:
    class Renamed(Event):
        type: str = "renamed"
        shown: str = ""

        @field_serializer("shown")
        def _upper(self, value: str) -> str:
            return value.upper()

    class Computed(Event):
        type: str = "computed"

        @computed_field  # type: ignore[prop-decorator]
        @property
        def twice(self) -> int:
            return self.seq * 2

    class OwnJson(Event):
        type: str = "own"

        def to_json(self) -> str:
            return "{}"

    for cls in (Renamed, Computed, OwnJson, UnknownEvent):
        assert shape(cls) is None, cls
    unknown = UnknownEvent(type="note", **HEAD, text=ODD)
    assert model_json(unknown) is None and event_lines([unknown]) == unknown.to_json()
    renamed = Renamed(**HEAD, shown="a")
    assert event_lines([renamed]) == renamed.to_json() and renamed.to_json().endswith('"shown":"A"}')


def test_a_dict_out_of_field_order_is_left_to_pydantic() -> None:
    event = _finished()
    event.__dict__["run_id"] = event.__dict__.pop("run_id")  # the same fields, run_id last
    assert model_json(event) is None


@pytest.mark.parametrize("with_orjson", [True, False])
async def test_a_traced_runs_stored_lines_are_each_events_to_json(
    with_orjson: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not with_orjson:
        monkeypatch.setattr(modeljson, "orjson", None)
    store = RunStore(tmp_path / "runs.db")
    agent = replace(collapsing_agent(), trace=store)  # every kind of event a trace keeps
    events = [event async for event in agent.stream("read the files")]
    rows = store.event_rows(events[0].run_id)
    assert [row.data for row in rows] == [event.to_json() for event in events]
    assert [row.event() for row in rows] == events
    assert (model_json(events[0]) is not None) == with_orjson


def test_replies_and_recorded_errors_are_written_as_pydantic_writes_them() -> None:
    from loopwarden.models.base import ModelReply, ToolCall
    from loopwarden.models.cassette import RecordedError

    replies = [
        ModelReply(),
        ModelReply(
            text=ODD,
            tool_calls=[ToolCall(id="c1", name="read", arguments='{"a": "\\n"}')],
            reasoning=ODD,
            usage=Usage(prompt_tokens=5),
            finish_reason="tool_calls",
            model=ODD,
            attempts=3,
            notes=[ClientNote(kind="retry", message=ODD, status=503, delay=1.5)],
        ),
        RecordedError(kind="timeout", message=ODD, retryable=True, status=None),
    ]
    for reply in replies:
        data = model_json(reply)
        assert data is not None and data.decode() == reply.model_dump_json(), type(reply).__name__


def test_non_finite_floats_anywhere_are_null_from_both() -> None:
    event = ToolCallProposed(
        **HEAD, turn=1, call_id="c", tool="t", arguments={"x": math.nan, "y": [-math.inf]}, args_hash="h"
    )
    assert _same(event) is not None and b'"arguments":{"x":null,"y":[null]}' in (model_json(event) or b"")
