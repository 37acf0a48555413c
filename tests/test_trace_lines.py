"""trace/lines.py writes a run's kept items (hotpath/kept.py: the dicts, what makes them, a call's
three events as one) as the JSON lines of the events they build, numbered as the store numbers them."""

from __future__ import annotations

from typing import Any

from loopwarden import Agent, FunctionModel
from loopwarden.events import Event
from loopwarden.hotpath.kept import count_of
from loopwarden.trace.lines import event_parts, event_row, flat, head_of, numbered
from test_kept_events import _script, read


def _kept_run() -> tuple[list[Any], list[Event]]:
    """An untraced run's kept items (every form: made later, a call's three as one, built) and its events."""
    result = Agent(FunctionModel(_script()), [read]).run_sync("x", run_id="r")
    items = list(result.__dict__["_events"].items)
    forms = {"built" if type(i) is not tuple else "call" if not isinstance(i[0], type) else "later" for i in items}
    assert forms == {"built", "call", "later"}
    return items, result.events


def test_kept_items_are_written_as_the_json_of_the_events_they_build() -> None:
    items, events = _kept_run()
    assert count_of(items) == len(events)
    assert event_parts(items) == [event.to_json().encode() for event in events]
    assert [event_row(item) for item in flat(items)] == [(e.seq, e.type, e.ts, e.to_json()) for e in events]
    firsts = [event for event, _ in _firsts(items, events)]
    assert [head_of(item) for item in items] == [("r", event.seq) for event in firsts]


def test_kept_items_numbered_otherwise_are_written_as_their_events_copied() -> None:
    """Another writer's numbers (or run id): each item is written as its events with the store's."""
    items, events = _kept_run()
    for run_id, first in (("r", 1), ("r", 41), ("other", 1), ("other", 7)):
        renumbered = numbered(items, run_id, first)
        expected = [e.model_copy(update={"seq": first + i, "run_id": run_id}) for i, e in enumerate(events)]
        assert event_parts(renumbered) == [event.to_json().encode() for event in expected]
        assert [head_of(item) for item in renumbered] == [(run_id, e.seq) for e, _ in _firsts(renumbered, expected)]
        if (run_id, first) == ("r", 1):
            assert all(a is b for a, b in zip(renumbered, items, strict=True))  # nothing copied
    assert event_parts(items) == [event.to_json().encode() for event in events]  # the originals unchanged


def _firsts(items: list[Any], events: list[Event]) -> list[tuple[Event, Any]]:
    """Each item with the first event it stands for."""
    out, at = [], 0
    for item in items:
        out.append((events[at], item))
        at += count_of([item])
    return out
