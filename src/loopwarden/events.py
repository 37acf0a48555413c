"""Typed, JSON-serialisable events: everything a run does is told as one of these.

Every event carries the run id, a per-run sequence number and a timestamp, and its class name is
its `type` in CamelCase (`ModelCalled` is "model_called"). The runtime's events form one
discriminated union, `RuntimeEvent`; `parse_event` reads them back, and any other type as an
`UnknownEvent` that keeps every field. Applications (the report agent, the server) add their own
classes by subclassing `Event` and read them back with an `EventParser` given those classes.

Events are validated wherever they are read (`parse_event`: JSON, SQLite, SSE) and built by
`EventStamper`; those of every tool step in field order from the loop's own values (hotpath/trusted.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .hotpath.trusted import in_order, own_fields_set_first, trusted
from .models.base import ClientNote, Usage

Status = Literal["completed", "degraded", "failed", "paused", "cancelled"]
StopPolicy = Literal["degrade", "fail", "handoff"]
VerdictAction = Literal["allowed", "cached", "nudged", "narrowed", "stopped", "refused", "paused"]
"""What the guard did with a proposed call (or a reply): each a past participle."""


_MODEL_DUMP_JSON = BaseModel.model_dump_json


class Event(BaseModel):
    """The fields every event has. Unknown fields are an error: a misspelt field never passes."""

    model_config = ConfigDict(extra="forbid")
    __setattr__ = own_fields_set_first  # built in order, one shape's events share a fields-set (hotpath/trusted.py)

    type: str
    run_id: str
    seq: int
    ts: float

    def to_json(self) -> str:
        """`model_dump_json()`, byte for byte: its defaults are the serializer's, so calling the
        serializer directly makes the same bytes without passing 15 keyword arguments on (about
        a third of a small event's cost; tests/test_event_json.py compares every event class)."""
        if type(self).model_dump_json is not _MODEL_DUMP_JSON:  # a subclass that writes its own JSON still does
            return self.model_dump_json()
        return self.__pydantic_serializer__.to_json(self).decode()


class UnknownEvent(Event):
    """An event whose type the parser was not given (an application's own, or a newer
    version's): every field is kept, so nothing read is lost or rewritten."""

    model_config = ConfigDict(extra="allow")


class Totals(BaseModel):
    model_calls: int = 0
    tool_calls_proposed: int = 0
    tool_executions: int = 0
    tool_rounds: int = 0
    duplicates_avoided: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    duration_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: Totals) -> Totals:
        """Both runs' totals (a conversation handed from one agent to another)."""
        return Totals(**{name: getattr(self, name) + getattr(other, name) for name in Totals.model_fields})

    def add_usage(self, usage: Usage) -> None:
        count_usage(self.__dict__, usage)


def count_usage(counts: dict[str, Any], usage: Usage) -> None:
    """Add `usage` to a `Totals`' values (its `__dict__`) in place: no pydantic `__setattr__` per
    count (nothing validates these), each value read once through the usage's own dict."""
    used = usage.__dict__
    counts["prompt_tokens"] += used["prompt_tokens"]
    counts["completion_tokens"] += used["completion_tokens"]
    counts["cached_tokens"] += used["cached_tokens"]


class RunStarted(Event):
    type: Literal["run_started"] = "run_started"
    input: str
    tools: list[str]
    model: str
    policy: StopPolicy
    intent: str | None = None


class ModelCalled(Event):
    type: Literal["model_called"] = "model_called"
    turn: int
    model: str
    tools_offered: list[str]
    n_tools_offered: int
    tool_choice: Any = None
    usage: Usage
    text: str | None = None
    n_tool_calls: int = 0
    duration_ms: float = 0.0
    notes: list[ClientNote] = Field(default_factory=list)
    """What the client handled on its own in this call (retries with their HTTP status and wait)."""
    attempts: int = 1
    """Requests that reached the server for this reply (each counts as a model call)."""


class ModelFailed(Event):
    """A model call failed after the client's own retries; the run ends with stop reason "model_error"."""

    type: Literal["model_failed"] = "model_failed"
    turn: int
    kind: str
    message: str
    retryable: bool = False
    status: int | None = None
    notes: list[ClientNote] = Field(default_factory=list)
    attempts: int = 0
    """Requests that reached the server before the call failed (counted as model calls)."""


class ToolCallProposed(Event):
    type: Literal["tool_call_proposed"] = "tool_call_proposed"
    turn: int
    call_id: str
    tool: str
    arguments: Any
    """As validated (defaults filled in, values coerced): what runs and what is fingerprinted."""
    args_hash: str
    raw_arguments: str | None = None
    """The argument text exactly as the model wrote it."""
    repaired: str | None = None
    """What had to be mended to read the model's argument text (raw control characters, text
    or chat-template tokens around the JSON), when anything had."""


class GuardVerdict(Event):
    type: Literal["guard_verdict"] = "guard_verdict"
    turn: int
    detector: str
    action: VerdictAction
    reason: str
    call_id: str | None = None
    tool: str | None = None
    count: int | None = None
    evidence: list[str] = Field(default_factory=list)


class ToolCallFinished(Event):
    """The outcome of one proposed call: run, answered from an earlier result (`cached`), or
    refused before running (`executed` False)."""

    type: Literal["tool_call_finished"] = "tool_call_finished"
    turn: int
    call_id: str
    tool: str
    ok: bool
    error_type: str | None = None
    retryable: bool = False
    message: str | None = None
    cached: bool = False
    executed: bool = True
    attempts: int = 1
    duration_ms: float = 0.0
    preview: str = ""
    checklist_done: list[str] = Field(default_factory=list)
    """Checklist items this result completed."""


class NudgeInjected(Event):
    type: Literal["nudge_injected"] = "nudge_injected"
    turn: int
    detector: str
    text: str


class HandedOff(Event):
    """A handoff tool passed the conversation to another agent (handoff.py); that agent's
    events follow under the same run id, with its own tools, guard state and budgets."""

    type: Literal["handed_off"] = "handed_off"
    turn: int
    tool: str
    model: str
    tools: list[str]
    reason: str = ""


class PhaseEnded(Event):
    type: Literal["phase_ended"] = "phase_ended"
    phase: str
    stop_reason: str
    policy: StopPolicy
    status: Status
    message: str = ""
    detectors: list[str] = Field(default_factory=list)
    """Every detector that stepped in (steered, narrowed or stopped) during the phase, in the
    order it first did; a budget that ended the phase comes last."""


class RunFinished(Event):
    type: Literal["run_finished"] = "run_finished"
    status: Status
    stop_reason: str
    output: Any = None
    totals: Totals
    checklist: dict[str, bool] | None = None
    """Each checklist item and whether it was done, when the run had a checklist."""
    detectors: list[str] = Field(default_factory=list)
    """As on `phase_ended`: the detectors that stepped in, in order."""
    rescued: bool = False
    """Completed only because the runtime forced the terminal tool (a fallback, not a finish)."""
    assembled: bool = False
    """The model gave no answer when asked; `output` was assembled from the tool results."""


class IntentRouted(Event):
    """The routing decision made by code before the first model call (policy/router.py, policy/scope.py)."""

    type: Literal["intent_routed"] = "intent_routed"
    intent: str | None
    candidate: str | None = None
    confidence: float
    method: str
    slots: dict[str, Any] = Field(default_factory=dict)
    pinned: dict[str, Any] = Field(default_factory=dict)
    missing: list[str] = Field(default_factory=list)
    question: str | None = None
    tools: list[str] = Field(default_factory=list)
    max_tool_rounds: int | None = None
    evidence: list[str] = Field(default_factory=list)
    model: str | None = None
    usage: Usage | None = None
    """Spent by a classifier's model call, if routing made one (also in the run's totals)."""


class ToolsDiscovered(Event):
    """Tools found by `search_tools`, offered from the next turn (tools/search.py)."""

    type: Literal["tools_discovered"] = "tools_discovered"
    turn: int
    tools: list[str]
    n_tools_offered_next: int


class ApprovalRequired(Event):
    """A `requires_approval` call waits for a decision (policy/approval.py). `resume` is the
    serialisable state (`PendingApproval`) from which the run can be resumed elsewhere."""

    type: Literal["approval_required"] = "approval_required"
    turn: int
    call_id: str
    tool: str
    arguments: Any
    args_hash: str
    resume: dict[str, Any] = Field(default_factory=dict)


class ApprovalDecided(Event):
    type: Literal["approval_decided"] = "approval_decided"
    turn: int
    call_id: str
    tool: str
    approved: bool
    reason: str | None = None
    by: str | None = None


RuntimeEvent = Annotated[
    RunStarted
    | IntentRouted
    | ModelCalled
    | ModelFailed
    | ToolCallProposed
    | GuardVerdict
    | ApprovalRequired
    | ApprovalDecided
    | ToolCallFinished
    | ToolsDiscovered
    | NudgeInjected
    | HandedOff
    | PhaseEnded
    | RunFinished,
    Field(discriminator="type"),
]
"""Every event the runtime emits, as one discriminated union on `type`."""

RUNTIME_EVENTS: tuple[type[Event], ...] = (
    RunStarted,
    IntentRouted,
    ModelCalled,
    ModelFailed,
    ToolCallProposed,
    GuardVerdict,
    ApprovalRequired,
    ApprovalDecided,
    ToolCallFinished,
    ToolsDiscovered,
    NudgeInjected,
    HandedOff,
    PhaseEnded,
    RunFinished,
)

E = TypeVar("E", bound=Event)
Head = tuple[str, str, int, float]
"""An event's type, run id, sequence number and time (`EventStamper.head`)."""
_tags: dict[type[Event], str] = {}


def _tag(cls: type[Event]) -> str:
    found = _tags[cls] = cls.model_fields["type"].default
    return found  # type: ignore[no-any-return]


class EventStamper:
    """Numbers a run's events and stamps them with run id and time. Each event is validated as
    it is built: a misspelt or missing field raises `pydantic.ValidationError` at once. The loop's
    per-step events go through `trusted` instead: field names still checked, values (the loop's
    own, of the right types) not re-validated, at about a fifth of the cost (bench/bench_events.py)."""

    def __init__(self, run_id: str, start_seq: int = 0) -> None:
        self.run_id = run_id
        self._seq = start_seq
        self.kept: list[Any] | None = None
        """Set by a run nobody watches as it goes (`Agent.run`): the events `record` is given are
        kept here as their dicts, with those yielded, and built when read (hotpath/kept.py)."""
        self.later = False
        """Whether `keep` may keep what an event's dict is made from, to make it when the event is
        built: when nobody reads the kept events before then (`Agent.run`, untraced or traced: a
        traced run's recorder makes the dicts to write them at its next commit, trace/lines.py)."""
        self.kept_most = sys.maxsize
        """`record` and `keep` keep nothing once `kept` holds this many items: the event is built
        and yielded (a traced run's recorder ends a batch at an event it sees: trace/recorder.py)."""

    def __call__(self, cls: type[E], **fields: Any) -> E:
        self._seq += 1
        return cls(run_id=self.run_id, seq=self._seq, ts=time.time(), **fields)

    def trusted(self, cls: type[E], **fields: Any) -> E:
        """As calling the stamper, for values of the right types made by the runtime (hotpath/trusted.py)."""
        self._seq += 1
        fields["run_id"], fields["seq"], fields["ts"] = self.run_id, self._seq, time.time()
        return trusted(cls, fields)

    def in_order(self, cls: type[E], fields: dict[str, Any], unset: tuple[str, ...] = ("type",)) -> E:
        """As `trusted`, for a dict of every field of `cls` after the four every event has, in field
        order (defaults too; those not given by name in `unset`, after "type"): no keywords to
        gather, no defaults to merge (trusted.in_order)."""
        self._seq += 1
        tag = _tags.get(cls) or _tag(cls)
        return in_order(cls, {"type": tag, "run_id": self.run_id, "seq": self._seq, "ts": time.time(), **fields}, unset)

    def head(self, cls: type[Event]) -> Head:
        """The next event's type, run id, number and time, for a caller writing its whole dict in
        field order (`built`): one dict, not the caller's merged into another (-3,500 instructions)."""
        self._seq += 1
        return _tags.get(cls) or _tag(cls), self.run_id, self._seq, time.time()

    @staticmethod
    def built(cls: type[E], values: dict[str, Any], unset: tuple[str, ...] = ("type",)) -> E:
        """As `in_order`, for `values` that begin with `head(cls)`'s four (trusted.in_order)."""
        return in_order(cls, values, unset)

    def record(self, cls: type[E], values: dict[str, Any], unset: tuple[str, ...] = ("type",)) -> E | None:
        """As `built`; None when the dict is kept instead (`kept`): the caller has nothing to yield."""
        kept = self.kept
        if kept is not None and len(kept) < self.kept_most:
            kept.append((cls, values, unset))
            return None
        return in_order(cls, values, unset)

    def keep(
        self, cls: type[E], make: Callable[..., tuple[dict[str, Any], tuple[str, ...]]], *made_from: Any
    ) -> E | None:
        """The next event of `cls`: `record(cls, *make(head, *made_from))`, `make` giving the dict
        and its `unset` from the event's `head` (its four fields, taken now). In a run whose kept
        events are built only when read (`later`), the dict is made then too: the head's values,
        `make` and what it is made from are kept instead, so a step pays neither for its events'
        dicts nor for gathering their fields. What `make` reads must not change after this call (a
        step's reply, its proposal once checked, its result once settled: tests/test_kept_events.py)."""
        self._seq += 1
        kind, seq, ts = _tags.get(cls) or _tag(cls), self._seq, time.time()
        kept = self.kept
        if self.later and kept is not None and len(kept) < self.kept_most:
            kept.append((cls, make, kind, self.run_id, seq, ts, *made_from))
            return None
        values, unset = make((kind, self.run_id, seq, ts), *made_from)
        if kept is not None and len(kept) < self.kept_most:  # `record`, written out: once per step event
            kept.append((cls, values, unset))
            return None
        return in_order(cls, values, unset)

    def take(self) -> int:
        """The next event's number, taken, for a caller keeping the event itself (`step_events.keep_call`)."""
        self._seq += 1
        return self._seq

    @property
    def last_seq(self) -> int:
        return self._seq


# Version 0 wrote some types and verdicts under other names; read them under today's.
_V0_TYPES = {
    "model_call": "model_called",
    "model_error": "model_failed",
    "tool_call": "tool_call_proposed",
    "tool_result": "tool_call_finished",
    "nudge": "nudge_injected",
}
_V0_ACTIONS = {"allow": "allowed", "nudge": "nudged"}


class EventParser:
    """Reads events back (from JSON, SQLite, SSE) into the classes it was given, validated as a
    discriminated union on `type`; any other type becomes an `UnknownEvent`."""

    def __init__(self, classes: Iterable[type[Event]] = RUNTIME_EVENTS) -> None:
        self.classes: dict[str, type[Event]] = {}
        for cls in classes:
            tag = cls.model_fields["type"].default
            if not isinstance(tag, str) or tag in self.classes:
                raise TypeError(f"{cls.__name__}: an event class needs its own literal `type` default")
            self.classes[tag] = cls
        union = Union[tuple(self.classes.values())]  # type: ignore[valid-type]  # noqa: UP007
        self._adapter: TypeAdapter[Event] = TypeAdapter(Annotated[union, Field(discriminator="type")])  # type: ignore[arg-type]

    def __call__(self, data: Mapping[str, Any]) -> Event:
        """Raises `pydantic.ValidationError` (a `ValueError`) on a malformed event of a known type."""
        data = _upgrade_v0(data)
        if data.get("type") not in self.classes:
            return UnknownEvent.model_validate(data)
        return self._adapter.validate_python(data)

    def with_classes(self, classes: Iterable[type[Event]]) -> EventParser:
        return EventParser([*self.classes.values(), *classes])


def _upgrade_v0(data: Mapping[str, Any]) -> Mapping[str, Any]:
    kind = data.get("type")
    if kind in _V0_TYPES:
        return {**data, "type": _V0_TYPES[str(kind)]}
    if kind == "guard_verdict" and data.get("action") in _V0_ACTIONS:
        return {**data, "action": _V0_ACTIONS[str(data["action"])]}
    if kind == "intent_routed" and "step_cap" in data:
        upgraded = {**data, "max_tool_rounds": data["step_cap"]}
        del upgraded["step_cap"]
        return upgraded
    return data


parse_event = EventParser()
"""Read a runtime event back; see `EventParser` for an application's own event classes."""
