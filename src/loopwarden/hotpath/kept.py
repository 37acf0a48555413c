"""A run's events kept while nobody watches the run, built when they are read.

`Agent.run` (and `run_sync`, `stream_text`) without a tracer hands no event to anyone while the
run goes: the events are only read afterwards, from `RunResult.events`. Such a run sets its
stamper's `kept` list and `later`; the loop's per-step events (`EventStamper.keep`) are then kept
there as what their dicts are made from (the head's values, taken when the event was made, the
function that makes the dict and its `unset`, and the step's reply or proposal it reads), next to
the events yielded (run start, findings, the ending, ...) in the order they were made; the list of
events is built on the first read of `result.events`: each dict made then and the event built from
it by the same `in_order` call as a streamed run's: equal events, the same ids, numbers and times.
A traced run's recorder keeps them the same way and makes each dict at its next commit, to write
it (trace/lines.py); the events are still built only when read.

tests/test_kept_events.py compares a run's kept events with the same run's events built at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, Union, overload

from .trusted import in_order

if TYPE_CHECKING:
    from ..events import Event

Kept: TypeAlias = "tuple[type[Event], dict[str, Any], tuple[str, ...]]"
"""A kept event: its class, the dict `in_order` builds it from, the names given as defaults. A
run that keeps its step events until read (`EventStamper.later`: an `Agent.run`, traced or not)
keeps `(class, make, type, run_id, seq, ts, *made_from)` instead (`EventStamper.keep`), or a few
events as one, `(make, how many, run_id, first seq, *made_from)`, `make(run_id, first seq,
*made_from)` giving each one's `Kept` (`step_events.keep_call`, a call's three events in the
loop's common turn). `kept_values` makes the dicts of any of them."""
Told: TypeAlias = Union["Event", "tuple[Any, ...]"]  # a string forward reference cannot use |
"""What a run that keeps its step events tells: an event, or a kept item, `Kept` or one of the
forms above (trace/lines.py writes any of them)."""


def _built(cls: type[Event], values: Any, *rest: Any) -> Event:
    if type(values) is dict:
        (unset,) = rest
    else:  # kept as the head's values, the function that makes the dict, what it makes it from (EventStamper.keep)
        kind, run_id, seq, ts, *made_from = rest
        values, unset = values((kind, run_id, seq, ts), *made_from)
    return in_order(cls, values, unset)


def kept_values(item: tuple[Any, ...]) -> list[Kept]:
    """The class, dict and unset of each event a kept item stands for, the dicts made now."""
    first = item[0]
    if not isinstance(first, type):  # (make, how many, run_id, first seq, *made_from)
        return first(*item[2:])  # type: ignore[no-any-return]
    if type(item[1]) is dict:
        return [item]
    cls, make, kind, run_id, seq, ts, *made_from = item
    values, unset = make((kind, run_id, seq, ts), *made_from)
    return [(cls, values, unset)]


def count_of(items: Sequence[Any]) -> int:
    """How many events `items` stand for (a kept item may stand for several)."""
    return sum(item[1] if type(item) is tuple and not isinstance(item[0], type) else 1 for item in items)


class KeptEvents:
    """A run's events in order: each an `Event`, or a kept one to build it from (`Kept`, or what
    `EventStamper.keep` keeps; each dict becomes its event's own: built once, whoever holds these asks)."""

    __slots__ = ("events", "items")

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        self.events: list[Event] | None = None

    def __len__(self) -> int:
        if self.events is not None:
            return len(self.events)
        return count_of(self.items)

    def __reduce__(self) -> tuple[type[KeptEvents], tuple[list[Event]]]:
        """Pickled (and deep-copied) as the events built: a kept step holds what its events are
        made from (its proposal, with the tool's function), which need not pickle."""
        return KeptEvents, (self.build(),)

    def build(self) -> list[Event]:
        if self.events is None:
            events: list[Event] = []
            for item in self.items:
                if type(item) is not tuple:
                    events.append(item)
                elif isinstance(item[0], type):
                    events.append(_built(*item))
                else:  # (make, how many, *what they are made from): several events kept as one (step_events.keep_call)
                    events += [in_order(*kept) for kept in item[0](*item[2:])]
            self.events = events
            self.items = self.events  # what they were made from (the steps' proposals) is freed
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
