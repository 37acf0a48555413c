"""Run state: what has been called, what came back, and the checklist that says when the
work is done. Checklist items are marked from tool results by a declared mapping, never by
the model's say-so."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .hotpath.frozen import quick_init
from .tools import ToolResult

ItemPredicate = Callable[[Any, ToolResult], bool]
"""(arguments, result) -> whether this result completes the item."""


@dataclass(slots=True)
class CallRecord:
    turn: int
    call_id: str
    tool: str
    arguments: Any
    fingerprint: str
    result: ToolResult | None = None
    executed: bool = False
    cached: bool = False
    exempt: bool = False
    """A `repeatable` (polling) or `terminal` tool: never evidence of a loop."""
    writes: bool = False
    """A `write` tool: a new write is progress even when its result text is not new."""


@quick_init
@dataclass(frozen=True, slots=True)
class ReplyRecord:
    """One model reply in the tool phase, as the text detectors see it."""

    turn: int
    text: str
    n_calls: int
    tools_offered: bool


@dataclass(frozen=True)
class ChecklistItem:
    """Done when `tool` returns an ok result (and `when`, if given, accepts it)."""

    name: str
    tool: str
    when: ItemPredicate | None = None
    required: bool = True

    def satisfied_by(self, record: CallRecord) -> bool:
        result = record.result
        if result is None or not result.ok or record.tool != self.tool:
            return False
        return self.when is None or self.when(record.arguments, result)


class Checklist:
    def __init__(self, items: Iterable[ChecklistItem]) -> None:
        self.items = list(items)
        self.done: dict[str, int] = {}  # item name -> turn it was done

    def update(self, record: CallRecord) -> list[str]:
        """Mark items this record satisfies; return the names newly done."""
        newly = [item.name for item in self.items if item.name not in self.done and item.satisfied_by(record)]
        for name in newly:
            self.done[name] = record.turn
        return newly

    @property
    def required(self) -> list[str]:
        return [item.name for item in self.items if item.required]

    @property
    def missing(self) -> list[str]:
        """Required items not done yet, in declared order."""
        return [name for name in self.required if name not in self.done]

    @property
    def complete(self) -> bool:
        return bool(self.items) and all(name in self.done for name in self.required)

    def snapshot(self) -> dict[str, bool]:
        return {item.name: item.name in self.done for item in self.items}


@dataclass
class RunState:
    checklist: Checklist | None = None
    records: list[CallRecord] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    replies: list[ReplyRecord] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    """Free room for detectors and applications; keyed by their name."""

    @property
    def task_open(self) -> bool:
        """A checklist is declared and some required item is not done yet."""
        return self.checklist is not None and not self.checklist.complete

    @property
    def checklist_complete(self) -> bool:
        """A checklist is declared and every required item is done."""
        return self.checklist is not None and self.checklist.complete

    def add_reply(self, turn: int, text: str, n_calls: int, tools_offered: bool) -> ReplyRecord:
        reply = ReplyRecord(turn, text, n_calls, tools_offered)
        self.replies.append(reply)
        if text:
            self.texts.append(text)
        return reply

    def add(self, record: CallRecord) -> list[str]:
        self.records.append(record)
        if self.checklist is None:
            return []
        return self.checklist.update(record)
