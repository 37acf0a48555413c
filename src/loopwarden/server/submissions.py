"""Reading a run submission: a folder under the allowed roots, or an upload unpacked into the
run's own folder, plus template, language and model settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ValidationError
from starlette.datastructures import UploadFile

from .jobs import InvalidRun, ModelSettings
from .settings import ServerSettings
from .uploads import IncomingFile, UploadRejected, unpack_upload


class Submission(BaseModel):
    folder: str | None = None
    template: str = "lab"
    lang: str = "en"
    strict: bool = False
    approve_code: bool = False
    model: ModelSettings = ModelSettings()


def resolve_folder(folder: str, roots: list[Path]) -> Path:
    """The folder as a real directory inside one of the allowed roots (symlinks resolved first,
    so a link cannot lead outside)."""
    if not roots:
        raise InvalidRun("this server accepts uploads only (no allowed folders are configured)")
    candidate = Path(folder).expanduser()
    options = [candidate] if candidate.is_absolute() else [root / candidate for root in roots]
    for option in options:
        try:
            resolved = option.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if any(resolved.is_relative_to(root.resolve()) for root in roots) and resolved.is_dir():
            return resolved
    raise InvalidRun(f"{folder!r} is not a folder under the allowed roots")


def allowed_folders(settings: ServerSettings) -> list[dict[str, str]]:
    folders = []
    for root in settings.allowed_roots:
        resolved = root.resolve()
        if not resolved.is_dir():
            continue
        folders.append({"name": resolved.name, "path": str(resolved)})
        for child in sorted(resolved.iterdir()):
            if child.is_dir() and not child.name.startswith("."):
                folders.append({"name": f"{resolved.name}/{child.name}", "path": str(child.resolve())})
    return folders


async def read_submission(request: Request) -> tuple[Submission, list[UploadFile]]:
    content_type = request.headers.get("content-type", "")
    try:
        if content_type.startswith("application/json"):
            return Submission.model_validate(await request.json()), []
        form = await request.form(max_files=100_000, max_fields=100)
        uploads = [v for v in form.getlist("files") if isinstance(v, UploadFile)]
        fields: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str) and k != "files"}
        model = {k: fields.pop(k) for k in ("preset", "base_url", "model", "api_key") if fields.get(k)}
        for flag in ("strict", "approve_code"):  # checkboxes: present and truthy, or absent
            if flag in fields:
                fields[flag] = fields[flag].lower() in ("1", "true", "on", "yes")
        if not fields.get("folder"):
            fields.pop("folder", None)
        return Submission.model_validate({**fields, "model": model}), uploads
    except ValidationError as error:
        raise InvalidRun(_validation_message(error)) from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidRun(f"the request body is not valid JSON: {error}") from error


def _validation_message(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())


def unpack_uploads(uploads: list[UploadFile], dest: Path, settings: ServerSettings) -> list[str]:
    received = sum(upload.size or 0 for upload in uploads)
    if received > settings.uploads.max_upload_bytes:
        raise UploadRejected(f"upload larger than {settings.uploads.max_upload_bytes} bytes", status=413)
    files = [IncomingFile(upload.filename or "upload", upload.file) for upload in uploads]
    return unpack_upload(files, dest, settings.uploads)
