"""The zero-LLM scan: list a data folder deterministically, bucketed by kind.

No model call, no file contents read. Hidden and VCS folders are skipped; symlinks are never
followed outside the root (a link to a file inside the root is listed, a linked folder is not
descended, so a link cycle cannot trap the scan).
"""

from __future__ import annotations

import gc
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from operator import attrgetter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Kind = Literal["documents", "images", "data", "other"]
KINDS: tuple[Kind, ...] = ("documents", "images", "data", "other")

DOCUMENT_EXTS = frozenset(
    {"pdf", "docx", "doc", "md", "markdown", "txt", "tex", "rst", "ipynb", "html", "htm", "rtf", "odt", "pptx", "org"}
)
IMAGE_EXTS = frozenset({"png", "jpg", "jpeg", "gif", "bmp", "tif", "tiff", "webp", "svg"})
DATA_EXTS = frozenset(
    {"csv", "tsv", "xlsx", "xls", "json", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "parquet", "h5", "hdf5"}
    | {"npy", "npz", "mat", "dat", "xml", "sqlite", "db", "log"}
)
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".git", ".hg", ".svn", ".ipynb_checkpoints"})


class FileEntry(BaseModel):
    path: str
    """POSIX path relative to the root."""
    size: int
    kind: Kind
    ext: str
    """Lower-case extension without the dot; "" when there is none."""


class SkippedEntry(BaseModel):
    path: str
    reason: str


class ScanResult(BaseModel):
    root: str
    files: list[FileEntry] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    sizes: dict[str, int] = Field(default_factory=dict)
    total_size: int = 0
    skipped: list[SkippedEntry] = Field(default_factory=list)

    def of_kind(self, kind: Kind) -> list[FileEntry]:
        return [f for f in self.files if f.kind == kind]

    def summary(self) -> str:
        parts = ", ".join(f"{self.counts.get(k, 0)} {k}" for k in KINDS)
        return f"{len(self.files)} files ({parts}), {self.total_size} bytes"

    def detail(self, max_files: int = 200) -> dict[str, object]:
        """The first progress event's detail: counts, sizes and (a bounded part of) the listing."""
        return {
            "root": self.root,
            "counts": self.counts,
            "sizes": self.sizes,
            "total_size": self.total_size,
            "n_files": len(self.files),
            "files": [f.path for f in self.files[:max_files]],
            "truncated": len(self.files) > max_files,
            "skipped": [s.model_dump() for s in self.skipped[:max_files]],
        }


def kind_of(ext: str) -> Kind:
    if ext in DOCUMENT_EXTS:
        return "documents"
    if ext in IMAGE_EXTS:
        return "images"
    if ext in DATA_EXTS:
        return "data"
    return "other"


def extension(name: str) -> str:
    dot = name.rfind(".")
    return name[dot + 1 :].lower() if dot > 0 else ""


_KIND_OF_EXT: dict[str, Kind] = {ext: kind_of(ext) for ext in DOCUMENT_EXTS | IMAGE_EXTS | DATA_EXTS}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def scan_folder(root: Path) -> ScanResult:
    """Scan `root` recursively; the listing is sorted, so two scans of one folder are equal."""
    real_root = os.path.realpath(root)
    files: list[FileEntry] = []
    skipped: list[SkippedEntry] = []
    with _collector_paused():
        _walk(real_root, files, skipped)
    files.sort(key=attrgetter("path"))
    skipped.sort(key=attrgetter("path"))
    counts: dict[str, int] = {k: 0 for k in KINDS}
    sizes: dict[str, int] = {k: 0 for k in KINDS}
    for f in files:
        counts[f.kind] += 1
        sizes[f.kind] += f.size
    # Every part was built from typed values here: validating 100k entries again would cost more
    # than the walk itself.
    return ScanResult.model_construct(
        root=real_root, files=files, counts=counts, sizes=sizes, total_size=sum(sizes.values()), skipped=skipped
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while the listing is built.

    The walk allocates one tracked object per file and no cycles, so collecting finds nothing,
    yet 100k new objects set off full collections of the whole heap: on the 100k-file benchmark
    they were a fifth of the scan. The pause is process-wide (other threads go without cyclic
    collection for the length of the walk; reference counting still frees everything else), and
    collection is re-enabled only if it was on, so a caller that turned it off keeps it off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _file_entry(path: str, size: int, name: str) -> FileEntry:
    """What FileEntry.model_construct(path=..., size=..., kind=..., ext=...) builds, 6x faster.

    model_construct loops over the fields in Python, and pydantic validation of the listing costs
    more than listing the folder; the values here are typed and complete, so neither is needed.
    The fields-set is shared: it already holds every field name, and pydantic only ever adds
    field names to it (model_copy copies it first), so sharing changes nothing observable but
    saves one set per file, which is most of the garbage collector's work on a 100k listing.
    tests/test_report_scan.py checks these entries equal, dump and copy like validated ones.
    """
    ext = extension(name)
    entry = _new(FileEntry)
    _set(entry, "__dict__", {"path": path, "size": size, "kind": _KIND_OF_EXT.get(ext, "other"), "ext": ext})
    _set(entry, "__pydantic_fields_set__", _ALL_FIELDS)
    _set(entry, "__pydantic_extra__", None)
    _set(entry, "__pydantic_private__", None)
    return entry


_new = object.__new__
_set = object.__setattr__
_ALL_FIELDS = set(FileEntry.model_fields)


def _walk(real_root: str, files: list[FileEntry], skipped: list[SkippedEntry]) -> None:
    # An explicit stack, not recursion: deep trees must not hit Python's recursion limit.
    # Each folder is opened with O_NOFOLLOW (a folder swapped for a symlink after it was listed is
    # refused, not followed) and listed through its descriptor, so the one lstat per file is an
    # fstatat on the bare name, as `find` does, not a walk of the full path again: this loop is
    # what the 100k-file benchmark measures against `find`.
    stack = [(real_root, "")]
    while stack:
        current, rel = stack.pop()
        try:
            fd = os.open(current, _DIR_FLAGS)
        except OSError as error:
            skipped.append(SkippedEntry(path=rel[:-1] or ".", reason=f"unreadable folder: {error.strerror}"))
            continue
        try:
            _list(fd, current, rel, real_root, files, skipped, stack)
        except OSError as error:
            skipped.append(SkippedEntry(path=rel[:-1] or ".", reason=f"unreadable folder: {error.strerror}"))
        finally:
            os.close(fd)


def _list(
    fd: int,
    current: str,
    rel: str,
    real_root: str,
    files: list[FileEntry],
    skipped: list[SkippedEntry],
    stack: list[tuple[str, str]],
) -> None:
    with os.scandir(fd) as listing:
        entries = list(listing)
    for entry in entries:
        name = entry.name
        if name[0] == "." or name in SKIPPED_DIRS:
            skipped.append(SkippedEntry(path=rel + name, reason="hidden or VCS"))
        elif entry.is_file(follow_symlinks=False):
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:  # removed or replaced between the listing and the stat
                skipped.append(SkippedEntry(path=rel + name, reason="vanished during the scan"))
                continue
            files.append(_file_entry(rel + name, size, name))
        elif entry.is_dir(follow_symlinks=False):
            stack.append((os.path.join(current, name), rel + name + "/"))
        elif entry.is_symlink():
            _add_link(os.path.join(current, name), rel + name, name, real_root, files, skipped)
        else:
            skipped.append(SkippedEntry(path=rel + name, reason="not a regular file (FIFO, socket or device)"))


def _add_link(
    link: str, rel_path: str, name: str, real_root: str, files: list[FileEntry], skipped: list[SkippedEntry]
) -> None:
    target = Path(os.path.realpath(link))
    if not target.is_relative_to(real_root):
        skipped.append(SkippedEntry(path=rel_path, reason="symlink pointing outside the folder"))
        return
    try:
        info = os.stat(target, follow_symlinks=False)
    except OSError:
        skipped.append(SkippedEntry(path=rel_path, reason="broken symlink"))
        return
    if stat.S_ISREG(info.st_mode):
        files.append(_file_entry(rel_path, info.st_size, name))
    else:
        skipped.append(SkippedEntry(path=rel_path, reason="symlink to a folder inside the root (not descended)"))
