"""Progress inside the exploration stage: files read of the planned set, figures made.

The planned set is what a careful explorer reads: every file of the folder, or a group's samples
for a group of similar files (the offline explorer plans exactly this). An explorer may read
fewer (it decides) or more (a group member besides the samples); the count is of planned files
only, so it never runs past its denominator."""

from __future__ import annotations

from ...events import Event, EventStamper, ToolCallFinished
from ..events import StageProgress
from ..folder.groups import sampled_paths
from .tools import ExplorationContext

COUNTED_TOOLS = frozenset({"read_file", "read_image", "make_figure"})


class ExploreProgress:
    def __init__(self, ctx: ExplorationContext, stamper: EventStamper) -> None:
        self._ctx = ctx
        self._stamper = stamper
        self.planned = sampled_paths(ctx.groups)
        self._last: tuple[int, int] | None = None

    def start(self) -> Event:
        self._last = (0, len(self._ctx.figures))
        return self._event(*self._last)

    def after(self, event: Event) -> Event | None:
        """A `stage_progress` event when a tool call changed what was read or drawn."""
        if not isinstance(event, ToolCallFinished) or event.tool not in COUNTED_TOOLS:
            return None
        now = (self._ctx.coverage.opened(self.planned), len(self._ctx.figures))
        if now == self._last:
            return None
        self._last = now
        return self._event(*now)

    def _event(self, files_read: int, figures_made: int) -> Event:
        return self._stamper(
            StageProgress,
            stage="explore",
            files_read=files_read,
            files_planned=len(self.planned),
            figures_made=figures_made,
        )
