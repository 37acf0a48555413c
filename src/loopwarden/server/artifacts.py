"""Serving a run's outputs: only files inside its out folder (opened once, links not followed,
internal working folders never listed or served), with content types that never let a
model-written file run as HTML or script in the page's origin. A malformed name is a 400 with a
one-line reason, a missing one a 404, never a 500."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from fastapi import HTTPException
from fastapi.responses import Response, StreamingResponse

from ..report.folder.paths import OutOfBounds, PathGuard
from ..trace.store import RunRecord, RunStore

INLINE_TYPES = {
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
TEXT_SUFFIXES = {".md", ".tex", ".txt", ".json", ".jsonl", ".csv", ".log", ".bib", ".py", ".yaml", ".yml"}
EVENTS_FILE = "events.jsonl"


MAX_NAME_CHARS = 1024
MAX_LISTED = 5000
INTERNAL_NAMES = frozenset({"_check"})
"""Working folders of a run that are never listed or served, besides every dot-named file or
folder (`.sandbox/` for figure staging, `.build/` for TeX, matplotlib's lock files, partial writes)."""


def internal(part: str) -> bool:
    return part.startswith(".") or part in INTERNAL_NAMES


def list_outputs(run: RunRecord) -> list[dict[str, object]]:
    """The run's files, internal folders left out. The folder changes while the run writes: a
    file that vanishes between listing and stat is simply not listed."""
    out = _out_dir(run)
    files: list[dict[str, object]] = []
    stack = [("", str(out))] if out is not None else []
    while stack and len(files) < MAX_LISTED:
        prefix, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # vanished, not a folder, unreadable
            continue
        for entry in entries:
            if internal(entry.name):
                continue
            name = f"{prefix}{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((f"{name}/", entry.path))
                elif entry.is_file(follow_symlinks=False) and name != EVENTS_FILE:
                    files.append({"name": name, "size": entry.stat(follow_symlinks=False).st_size})
            except OSError:
                continue
    files.sort(key=lambda f: str(f["name"]))
    files.append({"name": EVENTS_FILE, "size": None})
    return files


def _out_dir(run: RunRecord) -> Path | None:
    return None if run.out_dir is None else Path(run.out_dir)


def name_problem(name: str) -> str | None:
    """Why an artifact name is malformed (a 400), or None."""
    if not name:
        return "empty artifact name"
    if len(name) > MAX_NAME_CHARS:
        return f"artifact name longer than {MAX_NAME_CHARS} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "artifact name contains a control character (such as NUL)"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        return "artifact name is not valid UTF-8"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "artifact name must be a relative path with no empty, '.' or '..' parts"
    return None


def artifact_response(store: RunStore, run: RunRecord, name: str, *, download: bool) -> Response:
    if name == EVENTS_FILE:
        # The store is the source of truth (and has the events of a run still in progress).
        return StreamingResponse(
            _events_jsonl(store, run.id),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{run.id}-events.jsonl"'},
        )
    problem = name_problem(name)
    if problem is not None:
        raise HTTPException(400, problem)
    out = _out_dir(run)
    if out is None:
        raise HTTPException(404, "this run has no outputs")
    if any(internal(part) for part in name.split("/")):
        raise HTTPException(404, "no such artifact")
    try:  # opened once, without following links; what is served is what was opened
        fd = PathGuard(out).open_file(name)
    except (OutOfBounds, OSError, ValueError):
        raise HTTPException(404, "no such artifact") from None
    filename = name.rsplit("/", 1)[-1]
    suffix = Path(filename).suffix.lower()
    if suffix in INLINE_TYPES:
        media_type = INLINE_TYPES[suffix]
    elif suffix in TEXT_SUFFIXES:
        media_type = "text/plain; charset=utf-8"
    else:
        media_type, download = "application/octet-stream", True
    disposition = "attachment" if download else "inline"
    size = os.fstat(fd).st_size
    headers = {
        "Content-Length": str(size),
        "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(filename)}",
    }
    return StreamingResponse(_chunks(fd), media_type=media_type, headers=headers)


def _chunks(fd: int, size: int = 256 * 1024) -> Iterator[bytes]:
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def _events_jsonl(store: RunStore, run_id: str) -> Iterator[bytes]:
    after = 0
    while rows := store.event_rows(run_id, after, limit=500):
        yield "".join(row.data + "\n" for row in rows).encode()
        after = rows[-1].seq
