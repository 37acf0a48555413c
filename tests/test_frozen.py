"""quick_init (hotpath/frozen.py) makes the instances a frozen dataclass's generated __init__ makes."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from loopwarden.context import RunContext
from loopwarden.executor import Execution
from loopwarden.guard.repeat import RepeatDecision, RepeatGuard
from loopwarden.hotpath.frozen import quick_init
from loopwarden.models.arguments import Parsed
from loopwarden.state import ReplyRecord
from loopwarden.tools import ToolResult, tool


def _twins(slots: bool) -> tuple[type[Any], type[Any]]:
    """One frozen dataclass twice: with its generated __init__, and with quick_init's."""

    def make() -> type[Any]:
        @dataclasses.dataclass(frozen=True, slots=slots)
        class Point:
            x: int
            label: str
            weight: float = 1.5
            tags: tuple[str, ...] | None = None

        return Point

    return make(), quick_init(make())


@pytest.mark.parametrize("slots", [True, False])
def test_quick_init_makes_what_the_generated_init_makes(slots: bool) -> None:
    plain, quick = _twins(slots)
    assert inspect.signature(quick) == inspect.signature(plain)
    assert quick.__init__.__qualname__ == plain.__init__.__qualname__
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1, "a"), {}),
        ((1, "a", 2.0), {}),
        ((), {"x": 3, "label": "b", "tags": ("t",)}),
        ((4,), {"label": "c", "weight": 0.0}),
    ]
    for args, kwargs in calls:
        a, b = plain(*args, **kwargs), quick(*args, **kwargs)
        assert dataclasses.astuple(a) == dataclasses.astuple(b)
        assert repr(a) == repr(b)
        assert hash(a) == hash(b)
        assert b == quick(*args, **kwargs)
        assert dataclasses.replace(b, x=9) == quick(**{**dataclasses.asdict(b), "x": 9})
        with pytest.raises(dataclasses.FrozenInstanceError):
            b.x = 2
        if not slots:  # the same fields in field order, and a dict of the instance's own to add to
            assert list(a.__dict__.items()) == list(b.__dict__.items())
            b.__dict__["cached"] = 1
            assert b.cached == 1 and "cached" not in quick(*args, **kwargs).__dict__
    for args, kwargs in [((1,), {}), ((1, "a"), {"colour": 1}), ((1, "a", 1.0, None, 5), {}), ((1, "a"), {"x": 2})]:
        with pytest.raises(TypeError) as expected:
            plain(*args, **kwargs)
        with pytest.raises(TypeError) as got:
            quick(*args, **kwargs)
        assert str(got.value) == str(expected.value)


def _generated(cls: type[Any], *values: Any) -> Any:
    """What the generated __init__ does: object.__setattr__ per field, in field order."""
    instance = object.__new__(cls)
    for f, value in zip(dataclasses.fields(cls), values, strict=True):
        object.__setattr__(instance, f.name, value)
    return instance


def test_the_loops_records_are_what_their_generated_init_makes() -> None:
    result = ToolResult.success("x")
    for cls, values in [
        (ReplyRecord, (3, "text", 1, True)),
        (Execution, (result, 2, 1.5)),
        (RunContext, (("db", 1), "run", 4)),
        (RepeatDecision, ("nudged", 3, result, 1)),
        (Parsed, (("path", "a"), None, "code fence removed")),
    ]:
        built, expected = cls(*values), _generated(cls, *values)
        assert built == expected and hash(built) == hash(expected) and repr(built) == repr(expected)
        assert [p.name for p in list(inspect.signature(cls).parameters.values())] == [
            f.name for f in dataclasses.fields(cls)
        ]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(built, dataclasses.fields(cls)[0].name, values[0])
    assert RepeatDecision("allowed", 1) == RepeatDecision("allowed", 1, None, None)


def test_quick_init_refuses_what_it_cannot_build_faithfully() -> None:
    @dataclasses.dataclass
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Post:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class NotInInit:
        x: int = dataclasses.field(default=0, init=False)

    # (default factories are built as the generated __init__ builds them: tests/test_fixed_cost.py)
    for cls in (Mutable, Post, NotInInit, int):
        with pytest.raises(TypeError):
            quick_init(cls)


def test_the_ladders_shared_decisions_equal_fresh_ones() -> None:
    guard = RepeatGuard()

    def read(path: str) -> str:
        return path

    def poll(path: str) -> str:
        return path

    first = guard.check("read:a", tool(read), 1)
    assert first == RepeatDecision("allowed", 1) and first.executes
    exempt = guard.check("poll:a", tool(repeatable=True)(poll), 1)
    assert exempt == RepeatDecision("allowed", 0) and exempt.executes
    again = guard.check("read:a", tool(read), 2)
    assert again.count == 2 and again.first_turn == 1
