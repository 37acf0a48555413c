"""Events the server itself adds to a run's stream (the job adds all the others)."""

from __future__ import annotations

from typing import Any, Literal

from ..events import Event

APPROVAL_REQUIRED = "approval_required"


class RunQueued(Event):
    type: Literal["run_queued"] = "run_queued"
    params: dict[str, Any]
