"""Which loop detectors an eval run uses, and switching them off by name (`--disable cycle`),
so a regression can be introduced on purpose and the diff shown to catch it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection

from ..guard.detector import Detector

REPEATED_CALL = "repeated_call"
"""The repeated-call ladder lives in the loop itself; disabling it raises its counts out of reach."""

DetectorFactory = Callable[[], Detector]


def resolve_detectors(disabled: Collection[str]) -> list[DetectorFactory]:
    """The runtime's default detectors minus the disabled ones; unknown names are an error."""
    guard = importlib.import_module("loopwarden.guard")
    defaults: Callable[[Collection[str]], list[DetectorFactory]] | None = getattr(guard, "default_detectors", None)
    others = [name for name in disabled if name != REPEATED_CALL]
    if defaults is None:  # a runtime without pluggable detectors
        if others:
            raise ValueError(f"unknown detector names: {sorted(others)}; known: [{REPEATED_CALL!r}]")
        return []
    return defaults(others)


def detector_names() -> list[str]:
    guard = importlib.import_module("loopwarden.guard")
    return [REPEATED_CALL, *getattr(guard, "DEFAULT_DETECTORS", {})]
