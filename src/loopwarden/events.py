"""Typed, JSON-serialisable events: everything a run does is told as one of these.

Every event carries the run id, a per-run sequence number and a timestamp. Applications
(the report agent, the server) add their own event classes by subclassing `Event`; `parse_event`
reads back any event written by this module, and unknown types as a plain `Event`.
"""

from __future__ import annotations

import time
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .models.base import ClientNote, Usage

Status = Literal["completed", "degraded", "failed", "paused", "cancelled"]
StopPolicy = Literal["degrade", "fail", "handoff"]
VerdictAction = Literal["allow", "cached", "nudge", "narrowed", "stopped", "refused", "paused"]


class Event(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    run_id: str
    seq: int
    ts: float

    def to_json(self) -> str:
        return self.model_dump_json()


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

    def add_usage(self, usage: Usage) -> None:
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_tokens += usage.cached_tokens


class RunStarted(Event):
    type: Literal["run_started"] = "run_started"
    input: str
    tools: list[str]
    model: str
    policy: StopPolicy
    intent: str | None = None


class ModelCalled(Event):
    type: Literal["model_call"] = "model_call"
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
    type: Literal["model_error"] = "model_error"
    turn: int
    kind: str
    message: str
    retryable: bool = False
    status: int | None = None
    notes: list[ClientNote] = Field(default_factory=list)
    attempts: int = 0
    """Requests that reached the server before the call failed (counted as model calls)."""


class ToolCallProposed(Event):
    type: Literal["tool_call"] = "tool_call"
    turn: int
    call_id: str
    tool: str
    arguments: Any
    args_hash: str
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


class ToolResultEvent(Event):
    type: Literal["tool_result"] = "tool_result"
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
    type: Literal["nudge"] = "nudge"
    turn: int
    detector: str
    text: str


class PhaseEnded(Event):
    type: Literal["phase_ended"] = "phase_ended"
    phase: str
    stop_reason: str
    policy: StopPolicy
    status: Status
    message: str = ""


class RunFinished(Event):
    type: Literal["run_finished"] = "run_finished"
    status: Status
    stop_reason: str
    output: Any = None
    totals: Totals
    checklist: dict[str, bool] | None = None
    """Each checklist item and whether it was done, when the run had a checklist."""


class IntentRouted(Event):
    """The routing decision made by code before the first model call (router.py, scope.py)."""

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
    step_cap: int | None = None
    evidence: list[str] = Field(default_factory=list)
    model: str | None = None
    usage: Usage | None = None
    """Spent by a classifier's model call, if routing made one (also in the run's totals)."""


class ToolsDiscovered(Event):
    """Tools found by `search_tools`, offered from the next turn (toolsearch.py)."""

    type: Literal["tools_discovered"] = "tools_discovered"
    turn: int
    tools: list[str]
    n_tools_offered_next: int


class ApprovalRequired(Event):
    """A `requires_approval` call waits for a decision (approval.py). `resume` is the
    serialisable state (`PendingApproval`) from which the run can be resumed elsewhere."""

    type: Literal["approval_required"] = "approval_required"
    turn: int
    call_id: str
    tool: str
    arguments: Any
    args_hash: str
    repaired: str | None = None
    """What had to be mended to read the model's argument text (raw control characters, text
    or chat-template tokens around the JSON), when anything had."""
    resume: dict[str, Any] = Field(default_factory=dict)


class ApprovalDecided(Event):
    type: Literal["approval_decided"] = "approval_decided"
    turn: int
    call_id: str
    tool: str
    approved: bool
    reason: str | None = None
    by: str | None = None


E = TypeVar("E", bound=Event)


class EventStamper:
    """Numbers a run's events and stamps them with run id and time."""

    def __init__(self, run_id: str, start_seq: int = 0) -> None:
        self.run_id = run_id
        self._seq = start_seq

    def __call__(self, cls: type[E], **fields: Any) -> E:
        self._seq += 1
        return cls(run_id=self.run_id, seq=self._seq, ts=time.time(), **fields)

    @property
    def last_seq(self) -> int:
        return self._seq


def _known_types() -> dict[str, type[Event]]:
    known: dict[str, type[Event]] = {}
    stack: list[type[Event]] = [Event]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        default = cls.model_fields["type"].default
        if isinstance(default, str):
            known.setdefault(default, cls)
    return known


def parse_event(data: dict[str, Any]) -> Event:
    """Read an event back (from JSON, SQLite, SSE) into its class where the class is loaded."""
    cls = _known_types().get(str(data.get("type")), Event)
    return cls.model_validate(data)
