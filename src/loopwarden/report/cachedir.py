"""loopwarden's folder in the user's cache ($XDG_CACHE_HOME/loopwarden, else ~/.cache/loopwarden):
what a report run worked out once and would work out the same way again (where matplotlib's font
list lies, what an image reads as by OCR), kept so that the next run need not. Nothing in it is
needed: any of it may be deleted at any time, and a run that cannot write there works as before."""

from __future__ import annotations

import os
from pathlib import Path

from .atomic import atomic_write


def cache_dir() -> Path | None:
    """The folder (not made here); None when there is no home folder to put it in."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    except RuntimeError:
        return None
    return root / "loopwarden"


def write_atomically(path: Path, text: str) -> bool:
    """`atomic_write` with the folder made as needed; False if it cannot be written (a read-only
    cache) rather than an error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
    except OSError:
        return False
    return True
