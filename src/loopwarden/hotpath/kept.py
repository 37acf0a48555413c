"""A run's events kept as their dicts while nobody watches the run, built when they are read.

`Agent.run` (and `run_sync`, `stream_text`) without a tracer hands no event to anyone while the
run goes: the events are only read afterwards, from `RunResult.events`. Such a run sets its
stamper's `kept` list; the loop's per-step events (`EventStamper.record`) are then kept there
as the dict `in_order` would have made the event from (a value made only for the event, as the
proposal's `args_hash`, kept as what it is made of: `Later`), next to the events yielded (run start,
findings, the ending, ...) in the order they were made, and the list of events is built on the
first read of `result.events` by the same `in_order` call with the same dict: equal events,
the same ids, numbers and times (taken when the event was made), about a tenth of a step less.

tests/test_kept_events.py compares a run's kept events with the same run's events built at once.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias, Union, overload

from .trusted import in_order

if TYPE_CHECKING:
    from ..events import Event

Kept: TypeAlias = "tuple[type[Event], dict[str, Any], tuple[str, ...]]"
"""A kept event: its class, the dict `in_order` builds it from, the names given as defaults."""
Told: TypeAlias = Union["Event", Kept]  # a string forward reference cannot use |
"""What a run that keeps its step events tells: an event, or a kept one (trace/lines.py writes either)."""


class Later(partial[Any]):
    """A kept event's value made from what it is made of only when the event is built (the
    proposal's `args_hash`, a SHA-256 of its canonical JSON, a string that never changes)."""

    __slots__ = ()


def settle(values: dict[str, Any]) -> dict[str, Any]:
    """A kept dict with its `Later` values made, in place (the event built from it, or its JSON
    written from it, then has the same)."""
    for name in [name for name, value in values.items() if type(value) is Later]:
        values[name] = values[name]()
    return values


def _built(cls: type[Event], values: dict[str, Any], unset: tuple[str, ...]) -> Event:
    return in_order(cls, settle(values), unset)


class KeptEvents:
    """A run's events in order: each an `Event`, or a `(class, dict, unset)` to build one from
    (each dict becomes its event's own: built once, whoever holds these asks)."""

    __slots__ = ("events", "items")

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.events: list[Event] | None = None

    def __len__(self) -> int:
        return len(self.items)

    def build(self) -> list[Event]:
        if self.events is None:
            self.events = [_built(*item) if type(item) is tuple else item for item in self.items]
        return self.events


class EventsField:
    """`RunResult.events` (set on the class after the dataclass is made, so still a field and its
    constructor's argument): a list of events, or `KeptEvents` built into one on the first read."""

    def __init__(self, name: str) -> None:
        self.slot = f"_{name}"

    @overload
    def __get__(self, result: None, owner: type) -> EventsField: ...
    @overload
    def __get__(self, result: object, owner: type | None = None) -> list[Event]: ...
    def __get__(self, result: object, owner: type | None = None) -> list[Event] | EventsField:
        if result is None:
            return self
        events = result.__dict__[self.slot]
        if type(events) is KeptEvents:
            events = result.__dict__[self.slot] = events.build()
        return events  # type: ignore[no-any-return]

    def __set__(self, result: object, events: list[Event] | KeptEvents) -> None:
        result.__dict__[self.slot] = events

    def count(self, result: object) -> int:
        """How many events, without building kept ones."""
        return len(result.__dict__[self.slot])
