from __future__ import annotations

from collections.abc import Iterable

from loopwarden.events import Event, GuardVerdict


def verdicts(events: Iterable[Event]) -> list[str]:
    return [e.action for e in events if isinstance(e, GuardVerdict)]


def of_type(events: Iterable[Event], type_: str) -> list[Event]:
    return [e for e in events if e.type == type_]
