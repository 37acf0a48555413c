"""loopwarden's folder in the user's cache ($XDG_CACHE_HOME/loopwarden, else ~/.cache/loopwarden):
what a report run worked out once and would work out the same way again (where matplotlib's font
list lies, what an image reads as by OCR), kept so that the next run need not. Nothing in it is
needed: any of it may be deleted at any time, and a run that cannot write there works as before."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cache_dir() -> Path | None:
    """The folder (not made here); None when there is no home folder to put it in."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    try:
        root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    except RuntimeError:
        return None
    return root / "loopwarden"


def write_atomically(path: Path, text: str) -> bool:
    """Write `text` to `path` (its folder made as needed) so that a reader sees the old file or
    the whole new one, never part of one; False if it cannot be written (a read-only cache)."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        return False
    return True
