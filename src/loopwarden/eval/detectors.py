"""Which loop detectors an eval run uses, and switching them off by name (`--disable cycle`),
so a regression can be introduced on purpose and the diff shown to catch it."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence

from ..guard.detector import Detector

REPEATED_CALL = "repeated_call"
"""The repeated-call ladder lives in the loop itself; disabling it raises its counts out of reach."""


def available_detectors() -> list[type[Detector]]:
    """The runtime's default detectors (from `loopwarden.guard`, once they are built)."""
    guard = importlib.import_module("loopwarden.guard")
    found = getattr(guard, "DEFAULT_DETECTORS", None) or getattr(guard, "default_detectors", None)
    if found is None:
        return []
    listed = found() if callable(found) else found
    return list(listed)


def detector_names() -> list[str]:
    return [REPEATED_CALL, *(d.name for d in available_detectors())]


def resolve_detectors(disabled: Iterable[str]) -> Sequence[type[Detector]]:
    off = set(disabled)
    unknown = off - set(detector_names())
    if unknown:
        raise ValueError(f"unknown detector(s) {sorted(unknown)}; known: {detector_names()}")
    return [d for d in available_detectors() if d.name not in off]
