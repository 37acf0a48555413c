"""Guards decide, before and after every tool call, whether the run is still making progress."""

from collections.abc import Callable, Collection, Sequence

from ..errors import ConfigError
from .budget import Budgets, Price
from .cycles import CycleDetector
from .detector import Detector
from .error_loop import ErrorLoopDetector
from .fingerprint import args_hash, canonical_json, fingerprint
from .ladder import Finding, Ladder, Rung
from .monologue import MonologueDetector
from .no_progress import NoProgressDetector
from .repeat import RepeatGuard
from .repetition import RepetitionDetector

DetectorFactory = Callable[[], Detector]
"""Makes a fresh detector for one run (a class with default thresholds, or a lambda/partial)."""

DEFAULT_DETECTORS: dict[str, DetectorFactory] = {
    "cycle": CycleDetector,
    "error_loop": ErrorLoopDetector,
    "no_progress": NoProgressDetector,
    "repetition": RepetitionDetector,
    "monologue": MonologueDetector,
}

FORGET_CALL_RECORDS: frozenset[type[Detector]] = frozenset({CycleDetector, MonologueDetector})
"""Detectors whose `on_calls` keeps no record it is shown (these classes exactly, not subclasses):
when only these see a turn's records, the loop fills the same records in with their results."""


def default_detectors(disabled: Collection[str] = ()) -> list[DetectorFactory]:
    """The detectors an Agent uses when given none, minus those named in `disabled`."""
    if not disabled:  # the common case, once per run
        return list(DEFAULT_DETECTORS.values())
    unknown = set(disabled) - set(DEFAULT_DETECTORS) - {"repeated_call"}
    if unknown:
        raise ConfigError(f"unknown detector names: {sorted(unknown)}; known: {sorted(DEFAULT_DETECTORS)}")
    return [make for name, make in DEFAULT_DETECTORS.items() if name not in disabled]


def build_detectors(factories: Sequence[DetectorFactory] | None, disabled: Collection[str] = ()) -> list[Detector]:
    """One run's detectors: the defaults when `factories` is None, none when it is empty."""
    chosen = default_detectors(disabled) if factories is None else factories
    if not disabled:
        return [make() for make in chosen]
    return [detector for detector in (make() for make in chosen) if detector.name not in disabled]


__all__ = [
    "DEFAULT_DETECTORS",
    "FORGET_CALL_RECORDS",
    "Budgets",
    "CycleDetector",
    "Detector",
    "DetectorFactory",
    "ErrorLoopDetector",
    "Finding",
    "Ladder",
    "MonologueDetector",
    "NoProgressDetector",
    "Price",
    "RepeatGuard",
    "RepetitionDetector",
    "Rung",
    "args_hash",
    "build_detectors",
    "canonical_json",
    "default_detectors",
    "fingerprint",
]
