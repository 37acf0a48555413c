"""Turning an upload (one zip, or several files) into a fresh run folder, safely: limits on
bytes received, file count, unpacked bytes and compression ratio, and no member may land outside
the folder (absolute paths, `..`, drive letters, symlinks). Sizes are counted while writing, not
taken from the zip's headers, which an attacker writes."""

from __future__ import annotations

import posixpath
import shutil
import stat
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from ..errors import LoopwardenError
from .settings import UploadLimits

CHUNK = 64 * 1024


class UploadRejected(LoopwardenError, ValueError):
    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class IncomingFile:
    filename: str
    stream: IO[bytes]


def safe_relative_path(name: str) -> PurePosixPath:
    """The member/file name as a relative path inside the run folder, or UploadRejected."""
    cleaned = name.replace("\\", "/")
    if not cleaned or "\x00" in cleaned:
        raise UploadRejected(f"invalid file name {name!r}")
    if cleaned.startswith("/") or (len(cleaned) > 1 and cleaned[1] == ":"):
        raise UploadRejected(f"absolute path not allowed: {name!r}")
    parts = [p for p in cleaned.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise UploadRejected(f"path escapes the upload folder: {name!r}")
    return PurePosixPath(posixpath.join(*parts))


def _target(dest: Path, relative: PurePosixPath) -> Path:
    target = (dest / relative).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise UploadRejected(f"path escapes the upload folder: {relative}")
    return target


class _Budget:
    def __init__(self, limits: UploadLimits) -> None:
        self.limits = limits
        self.files = 0
        self.bytes = 0

    def add_file(self) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise UploadRejected(f"too many files (limit {self.limits.max_files})", status=413)

    def add_bytes(self, n: int) -> None:
        self.bytes += n
        if self.bytes > self.limits.max_unpacked_bytes:
            raise UploadRejected(f"upload unpacks to more than {self.limits.max_unpacked_bytes} bytes", status=413)


def _copy(source: IO[bytes], target: Path, budget: _Budget, *, max_bytes: int | None = None) -> int:
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with target.open("xb") as out:
        while chunk := source.read(CHUNK):
            written += len(chunk)
            budget.add_bytes(len(chunk))
            if max_bytes is not None and written > max_bytes:
                raise UploadRejected(f"{target.name}: compression ratio above the limit", status=413)
            out.write(chunk)
    return written


def _is_zip(file: IncomingFile) -> bool:
    if not file.filename.lower().endswith(".zip"):
        return False
    position = file.stream.tell()
    magic = file.stream.read(4)
    file.stream.seek(position)
    return magic in (b"PK\x03\x04", b"PK\x05\x06")


def unpack_zip(stream: IO[bytes], dest: Path, limits: UploadLimits) -> list[str]:
    budget = _Budget(limits)
    try:
        archive = zipfile.ZipFile(stream)
    except zipfile.BadZipFile as error:
        raise UploadRejected(f"not a valid zip file: {error}") from error
    written: list[str] = []
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > limits.max_files:
            raise UploadRejected(f"too many files (limit {limits.max_files})", status=413)
        for member in members:
            mode = member.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise UploadRejected(f"symbolic links are not allowed: {member.filename!r}")
            relative = safe_relative_path(member.filename)
            target = _target(dest, relative)
            budget.add_file()
            # The ratio is enforced on the bytes actually produced, so a lying header cannot help.
            max_bytes = int(max(member.compress_size, 1) * limits.max_ratio)
            try:
                with archive.open(member) as source:
                    _copy(source, target, budget, max_bytes=max_bytes)
            except FileExistsError as error:
                raise UploadRejected(f"duplicate file in archive: {member.filename!r}") from error
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as error:
                raise UploadRejected(f"cannot unpack {member.filename!r}: {error}") from error
            written.append(relative.as_posix())
    return written


def unpack_upload(files: Iterable[IncomingFile], dest: Path, limits: UploadLimits) -> list[str]:
    """Unpack into `dest` (created fresh, must not exist). One zip is unpacked; anything else is
    saved file by file (names may carry sub-folders, as a folder upload sends them). On any
    rejection the partial folder is removed. Returns the relative paths written."""
    incoming = list(files)
    if not incoming:
        raise UploadRejected("no files uploaded")
    dest.mkdir(parents=True, exist_ok=False)
    try:
        if len(incoming) == 1 and _is_zip(incoming[0]):
            written = unpack_zip(incoming[0].stream, dest, limits)
        else:
            written = _save_files(incoming, dest, limits)
        if not written:
            raise UploadRejected("the upload contains no files")
        return written
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def _save_files(incoming: list[IncomingFile], dest: Path, limits: UploadLimits) -> list[str]:
    budget = _Budget(limits)
    written = []
    for file in incoming:
        relative = safe_relative_path(file.filename)
        budget.add_file()
        try:
            _copy(file.stream, _target(dest, relative), budget)
        except FileExistsError as error:
            raise UploadRejected(f"duplicate file name: {file.filename!r}") from error
        written.append(relative.as_posix())
    return written
