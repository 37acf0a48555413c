"""What the run store hands back: plain pydantic records of runs, events, artifacts, approvals."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..events import Event, parse_event

RunStatus = Literal["queued", "running", "paused", "completed", "degraded", "failed", "cancelled", "interrupted"]
ApprovalStatus = Literal["pending", "approved", "denied", "expired"]
ACTIVE_STATUSES: frozenset[str] = frozenset({"queued", "running", "paused"})
FINAL_STATUSES: frozenset[str] = frozenset({"completed", "degraded", "failed", "cancelled", "interrupted"})


class RunRecord(BaseModel):
    id: str
    kind: str
    status: RunStatus
    created_at: float
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    data_dir: str | None = None
    out_dir: str | None = None
    last_seq: int = 0
    progress: dict[str, Any] | None = None
    stop_reasons: list[str] = Field(default_factory=list)
    totals: dict[str, Any] | None = None
    message: str = ""

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES


class StoredEvent(BaseModel):
    """One event row as stored: `data` is the event's JSON, ready to stream without re-encoding."""

    run_id: str
    seq: int
    type: str
    ts: float
    data: str

    def event(self) -> Event:
        return parse_event(json.loads(self.data))


class ArtifactRecord(BaseModel):
    run_id: str
    name: str
    path: str
    size: int
    media_type: str
    created_at: float


class ApprovalRecord(BaseModel):
    run_id: str
    call_id: str
    tool: str
    arguments: Any = None
    reason: str = ""
    status: ApprovalStatus = "pending"
    created_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    note: str = ""
