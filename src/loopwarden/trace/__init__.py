"""Where runs are kept: the run store (SQLite by default) holds runs, their numbered events,
artifacts and pending approvals, so a run survives its process."""

from .store import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    ApprovalRecord,
    ArtifactRecord,
    RunRecord,
    RunStore,
    StoredEvent,
)

__all__ = [
    "ACTIVE_STATUSES",
    "FINAL_STATUSES",
    "ApprovalRecord",
    "ArtifactRecord",
    "RunRecord",
    "RunStore",
    "StoredEvent",
]
