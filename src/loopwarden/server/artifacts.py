"""Serving a run's outputs: only files inside its out folder, with content types that never let
a model-written file run as HTML or script in the page's origin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fastapi import HTTPException
from fastapi.responses import FileResponse, Response, StreamingResponse

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


def list_outputs(run: RunRecord) -> list[dict[str, object]]:
    out = _out_dir(run)
    files: list[dict[str, object]] = []
    if out is not None and out.is_dir():
        for path in sorted(p for p in out.rglob("*") if p.is_file() and not p.is_symlink()):
            name = path.relative_to(out).as_posix()
            if name != EVENTS_FILE:
                files.append({"name": name, "size": path.stat().st_size})
    files.append({"name": EVENTS_FILE, "size": None})
    return files


def _out_dir(run: RunRecord) -> Path | None:
    return None if run.out_dir is None else Path(run.out_dir)


def artifact_response(store: RunStore, run: RunRecord, name: str, *, download: bool) -> Response:
    if name == EVENTS_FILE:
        # The store is the source of truth (and has the events of a run still in progress).
        return StreamingResponse(
            _events_jsonl(store, run.id),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{run.id}-events.jsonl"'},
        )
    out = _out_dir(run)
    if out is None:
        raise HTTPException(404, "this run has no outputs")
    target = (out / name).resolve()
    if not target.is_relative_to(out.resolve()) or not target.is_file():
        raise HTTPException(404, f"no artifact {name!r}")
    suffix = target.suffix.lower()
    if suffix in INLINE_TYPES:
        media_type = INLINE_TYPES[suffix]
    elif suffix in TEXT_SUFFIXES:
        media_type = "text/plain; charset=utf-8"
    else:
        media_type, download = "application/octet-stream", True
    disposition = "attachment" if download else "inline"
    return FileResponse(target, media_type=media_type, content_disposition_type=disposition, filename=target.name)


def _events_jsonl(store: RunStore, run_id: str) -> Iterator[bytes]:
    after = 0
    while rows := store.event_rows(run_id, after, limit=500):
        yield "".join(row.data + "\n" for row in rows).encode()
        after = rows[-1].seq
