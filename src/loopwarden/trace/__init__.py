"""Where runs are kept: the run store (SQLite by default) holds runs, their numbered events,
artifacts and pending approvals, so a run survives its process.

The names below load on first use: `import loopwarden` (whose Agent reaches trace.tracing)
never imports the store or sqlite3 unless a run is traced to a store."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
