"""The shape every loop detector shares: it watches calls, results and text, and answers
with a `Finding` on the ladder (steer once, narrow, stop) or nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ladder import Finding

if TYPE_CHECKING:
    from ..state import CallRecord, RunState


class Detector:
    """Base class: override only the hooks a detector needs. One instance serves one run."""

    name: str = "detector"
    stop_reason: str = "detector"

    def on_calls(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        """After the model proposed this turn's calls, before any runs."""
        return None

    def on_results(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        """After this turn's calls have results (executed, cached or refused)."""
        return None

    def on_text(self, turn: int, text: str, tools_offered: bool, state: RunState) -> Finding | None:
        """After a model reply with text (with or without calls)."""
        return None


HOOKS = ("on_calls", "on_results", "on_text")
_INERT = tuple((hook, getattr(Detector, hook)) for hook in HOOKS)


def hooked(detectors: list[Detector]) -> dict[str, list[Detector]]:
    """The detectors whose hook does something (the base class's hooks do nothing: an instance's
    own or a subclass's does), for each of the three hooks, in one pass (once per run). Told by
    what the hook is bound to, not by looking in `detector.__dict__`: in CPython 3.11 reading an
    instance's `__dict__` moves its attributes out of the instance into a dict that the
    specialised attribute read misses, and every later `self.x` of that detector (a dozen or two
    a step) then took the generic way, about 260 instructions more each."""
    found: dict[str, list[Detector]] = {hook: [] for hook in HOOKS}
    for detector in detectors:
        for hook, inert in _INERT:
            if getattr(getattr(detector, hook, None), "__func__", None) is not inert:
                found[hook].append(detector)
    return found
