"""What the window adds to the report server's API, under /api/app/ and behind the same per-launch
token: the native folder dialog (the folder picked becomes the only allowed root), opening a run's
PDF in the system viewer and showing its folder in the file manager. The desktop itself is a
`Shell`, so these routes are tested without a window (and the window without them)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path
from typing import Any, Protocol

from fastapi import Depends, FastAPI, HTTPException

from ..server.security import require_token
from ..server.settings import ServerSettings
from ..trace.store import RunRecord, RunStore

_RUN_ID = re.compile(r"[0-9a-f]{32}")
FOLDER_FILE = "app-folder.json"
"""In the run store's folder: the last folder picked, allowed again at the next launch."""


def remembered_folder(state_dir: Path) -> Path | None:
    """The folder picked at an earlier launch, while it is still a folder."""
    try:
        folder = Path(json.loads((state_dir / FOLDER_FILE).read_text(encoding="utf-8"))["folder"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return folder if folder.is_absolute() and folder.is_dir() else None


def _remember_folder(state_dir: Path, folder: Path) -> None:
    with contextlib.suppress(OSError):  # not remembered is no reason to refuse the pick
        (state_dir / FOLDER_FILE).write_text(json.dumps({"folder": str(folder)}), encoding="utf-8")


class Shell(Protocol):
    """The desktop around the page. Each method may be called from the server's thread."""

    async def pick_folder(self, start: Path | None) -> Path | None:
        """The folder the user chose in the native dialog, or None when they cancelled."""
        ...

    def open_path(self, path: Path) -> bool:
        """Open a file or folder with the system's application for it; False when none took it."""
        ...


def add_desktop_routes(app: FastAPI, shell: Shell) -> None:
    settings: ServerSettings = app.state.settings
    store: RunStore = app.state.store
    picking = asyncio.Lock()
    api = [Depends(require_token)]

    def root() -> Path | None:
        return settings.allowed_roots[0] if settings.allowed_roots else None

    def finished_run(run_id: str) -> tuple[RunRecord, Path]:
        run = store.find_run(run_id) if _RUN_ID.fullmatch(run_id) else None
        if run is None or not run.out_dir:
            raise HTTPException(404, "no such run")
        return run, Path(run.out_dir)

    @app.get("/api/app", dependencies=api)
    def info() -> dict[str, Any]:
        picked = root()
        return {"desktop": True, "folder": None if picked is None else str(picked)}

    @app.post("/api/app/folder", dependencies=api)
    async def pick_folder() -> dict[str, Any]:
        if picking.locked():
            raise HTTPException(409, "the folder dialog is already open")
        async with picking:
            chosen = await shell.pick_folder(root())
        if chosen is None:
            picked = root()
            return {"folder": None if picked is None else str(picked), "changed": False}
        try:
            folder = chosen.resolve(strict=True)
        except (OSError, RuntimeError) as error:
            raise HTTPException(400, f"{chosen} cannot be used: {error}") from error
        if not folder.is_dir():
            raise HTTPException(400, f"{chosen} is not a folder")
        settings.allowed_roots = [folder]  # what the user picked, nothing more
        _remember_folder(settings.db_path.parent, folder)
        return {"folder": str(folder), "changed": True}

    @app.post("/api/app/runs/{run_id}/open", dependencies=api)
    def open_pdf(run_id: str) -> dict[str, Any]:
        _, out_dir = finished_run(run_id)
        pdf = out_dir / "report.pdf"
        if not pdf.is_file() or pdf.is_symlink():
            raise HTTPException(404, "this run has no PDF")
        return {"path": str(pdf), "opened": shell.open_path(pdf)}

    @app.post("/api/app/runs/{run_id}/reveal", dependencies=api)
    def reveal(run_id: str) -> dict[str, Any]:
        _, out_dir = finished_run(run_id)
        if not out_dir.is_dir():
            raise HTTPException(404, "this run's folder is gone")
        return {"path": str(out_dir), "opened": shell.open_path(out_dir)}
