"""Guards decide, before and after every tool call, whether the run is still making progress."""

from .budget import Budgets, Price
from .fingerprint import args_hash, canonical_json, fingerprint
from .ladder import Finding, Ladder, Rung
from .repeat import RepeatGuard

__all__ = [
    "Budgets",
    "Finding",
    "Ladder",
    "Price",
    "RepeatGuard",
    "Rung",
    "args_hash",
    "canonical_json",
    "fingerprint",
]
