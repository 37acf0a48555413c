"""`Event.to_json()` calls the model's serializer directly (the run store writes every event
with it); it must make exactly the bytes `model_dump_json()` makes, for every event class and
any values: validated ones, and values of other types put in unchecked (trusted construction
does that), where both warn or raise alike."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import cache
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from loopwarden.events import RUNTIME_EVENTS, Event, ModelCalled, UnknownEvent
from loopwarden.models.base import Usage
from loopwarden.report.events import REPORT_EVENTS

EVENT_CLASSES = [*RUNTIME_EVENTS, *REPORT_EVENTS, UnknownEvent]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # nan and the infinities too: both write them as null
    st.text(),
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)


@cache  # built once per type: a new strategy is validated and labelled again at each example's draw
def _values(annotation: Any) -> st.SearchStrategy[Any]:
    """Values of the field's declared type, or any JSON value."""
    return st.one_of(_typed(annotation), json_values)


def _typed(annotation: Any) -> st.SearchStrategy[Any]:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, UnionType):
        return st.one_of(*map(_typed, args))
    if origin is list:
        return st.lists(_typed(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(_typed(args[0]), _typed(args[1]), max_size=3)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):  # nested: valid or not
        fields = {name: _values(f.annotation) for name, f in annotation.model_fields.items()}
        return st.fixed_dictionaries({}, optional=fields).map(lambda kw: annotation.model_construct(**kw))
    if annotation in (str, int, float, bool, type(None)):
        return st.from_type(annotation)
    return json_values  # Any


@st.composite
def events(draw: st.DrawFn, cls: type[Event]) -> dict[str, Any]:
    """The fields of an instance of `cls`: each of its declared type or any JSON value."""
    fields: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if name == "type":
            fields[name] = field.default
        elif field.is_required() or draw(st.booleans()):
            fields[name] = draw(_values(field.annotation))
    if cls is UnknownEvent:
        fields.update(draw(st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=3)))
    return fields


def _same_bytes(event: Event) -> None:
    _alike(event.model_dump_json, event.to_json)


def _alike(expected_of: Callable[[], str | None], got_of: Callable[[], str | None]) -> None:
    """The same text from both (or both raise alike), each warning about the same values."""
    with warnings.catch_warnings(record=True) as told:
        warnings.simplefilter("always")
        try:
            expected: str | type[BaseException] | None = expected_of()
        except (PydanticSerializationError, ValueError, TypeError) as error:
            expected = type(error)
        try:
            got: str | type[BaseException] | None = got_of()
        except (PydanticSerializationError, ValueError, TypeError) as error:
            got = type(error)
    assert got == expected
    half = len(told) // 2  # each path warned about the same values, in the same words
    assert [str(w.message) for w in told[:half]] == [str(w.message) for w in told[half:]]


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_to_json_is_model_dump_json_byte_for_byte(cls: type[Event], data: st.DataObject) -> None:
    fields = data.draw(events(cls))
    _same_bytes(cls.model_construct(**fields))  # unchecked: any values, of any types
    try:
        validated = cls.model_validate(fields)
    except ValidationError:
        return
    _same_bytes(validated)


def test_unchecked_values_of_other_types_are_written_as_the_model_writes_them() -> None:
    # The cases where the type-blind encoder (pydantic_core.to_json of the fields) would differ:
    # an int in a float field, a bool in an int field, an infinity. to_json() follows the model.
    usage = Usage.model_construct(prompt_tokens=True, completion_tokens=2)
    event = ModelCalled.model_construct(
        type="model_called", run_id="r", seq=1, ts=1, turn=1, model="m", tools_offered=[], n_tools_offered=0,
        usage=usage, duration_ms=math.inf,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert event.to_json() == event.model_dump_json()
        assert '"ts":1.0' in event.to_json() and '"duration_ms":null' in event.to_json()


def test_a_subclass_that_writes_its_own_json_is_followed() -> None:
    class Shouting(Event):
        type: str = "shouting"

        def model_dump_json(self, **_: Any) -> str:
            return super().model_dump_json().upper()

    assert Shouting(run_id="r", seq=1, ts=0.5).to_json() == '{"TYPE":"SHOUTING","RUN_ID":"R","SEQ":1,"TS":0.5}'


def _same_line(kept: tuple[type[Event], dict[str, Any], tuple[str, ...]]) -> None:
    """A kept event's stored line (trace/lines.py, written from its dict) against the JSON of the
    event it builds (hotpath/kept.py, on a copy of the dict): the same bytes, or both raise."""
    from loopwarden.hotpath.kept import _built
    from loopwarden.trace.lines import event_lines

    def built() -> str | None:
        line = _built(kept[0], dict(kept[1]), kept[2]).to_json()
        return None if "\n" in line else line  # such a batch goes to rows of `events`

    _alike(built, lambda: event_lines([kept]))


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_kept_dict_is_stored_as_the_json_of_the_event_it_builds(cls: type[Event], data: st.DataObject) -> None:
    """A traced `Agent.run` commits its step events from their dicts (trace/lines.py): any
    values, of any types, in every field in field order (as `EventStamper.record` is given them)."""
    fields = data.draw(events(cls))
    values = dict(cls.model_construct(**fields).__dict__)  # every field, defaults too, in field order
    _same_line((cls, values, ("type",)))
    _same_line((cls, {k: v for k, v in values.items() if k != "ts"}, ("type",)))  # a field missing: built


def test_a_kept_dict_of_a_class_with_its_own_json_or_a_field_serializer_is_written_by_the_event() -> None:
    from pydantic import field_serializer

    from loopwarden.trace.lines import event_lines

    class Shouting(Event):
        type: str = "shouting"

        def model_dump_json(self, **_: Any) -> str:
            return super().model_dump_json().upper()

    class Masked(Event):
        type: str = "masked"
        secret: str = ""

        @field_serializer("secret")
        def _mask(self, value: str) -> str:
            return f"{self.type}:{'*' * len(value)}"

    head = {"run_id": "r", "seq": 1, "ts": 0.5}
    shouting = (Shouting, {"type": "shouting", **head}, ("type",))
    masked = (Masked, {"type": "masked", **head, "secret": "abc"}, ("type",))
    assert event_lines([shouting, masked]) == '{"TYPE":"SHOUTING","RUN_ID":"R","SEQ":1,"TS":0.5}\n' + (
        '{"type":"masked","run_id":"r","seq":1,"ts":0.5,"secret":"masked:***"}'
    )
