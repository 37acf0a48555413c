"""A file written whole or not at all: the report's outputs (report.tex, report.md,
exploration.json, references.bib) and the entries of loopwarden's cache folder (cachedir.py)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the whole new one, never part
    of one. The partial file is named by this process (two processes writing one path do not
    write into each other's) and removed when the write fails; the error is raised."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
