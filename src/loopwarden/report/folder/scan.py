"""The zero-LLM scan: list a data folder deterministically, bucketed by kind.

No model call, no file contents read. Hidden and VCS folders are skipped; symlinks are never
followed outside the root (a link to a file inside the root is listed, a linked folder is not
descended, so a link cycle cannot trap the scan).
"""

from __future__ import annotations

import os
from collections import Counter
from itertools import compress, islice, repeat
from operator import eq, itemgetter, lt
from pathlib import Path

from pydantic import BaseModel, Field

from .listing import FileEntry, FileList, Kind, collector_paused
from .parallel import walk_tree
from .paths import shown_name
from .walk import SKIPPED_DIRS

__all__ = [
    "KINDS",
    "SKIPPED_DIRS",
    "FileEntry",
    "FileList",
    "Kind",
    "ScanResult",
    "SkippedEntry",
    "extension",
    "kind_of",
    "scan_folder",
]

KINDS: tuple[Kind, ...] = ("documents", "images", "data", "other")

DOCUMENT_EXTS = frozenset(
    {"pdf", "docx", "doc", "md", "markdown", "txt", "tex", "rst", "ipynb", "html", "htm", "rtf", "odt", "pptx", "org"}
)
IMAGE_EXTS = frozenset({"png", "jpg", "jpeg", "gif", "bmp", "tif", "tiff", "webp", "svg"})
DATA_EXTS = frozenset(
    {"csv", "tsv", "xlsx", "xls", "json", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "parquet", "h5", "hdf5"}
    | {"npy", "npz", "mat", "dat", "xml", "sqlite", "db", "log"}
)


class SkippedEntry(BaseModel):
    path: str
    reason: str


class ScanResult(BaseModel):
    root: str
    files: FileList = Field(default_factory=FileList)
    """Behaves as a read-only list[FileEntry] (and dumps as one); entries are built on first use."""
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
            "files": self.files.paths(max_files),
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
_OTHER: Kind = "other"
_PATH = itemgetter(0)
PARALLEL_ENV = "LOOPWARDEN_SCAN_PARALLEL"
"""Set to 0 to keep every scan in one process (see `scan_folder`)."""


def scan_folder(root: Path, parallel: bool | None = None) -> ScanResult:
    """Scan `root` recursively; the listing is sorted, so two scans of one folder are equal.

    A large tree is walked by this process and one worker process together (`parallel.py`),
    unless `parallel` is False, or None with LOOPWARDEN_SCAN_PARALLEL=0; the result is the same.
    """
    real_root = os.path.realpath(root)
    if parallel is None:
        parallel = os.environ.get(PARALLEL_ENV, "1").strip() != "0"
    with collector_paused():
        paths, sizes, exts, found_skipped = walk_tree(real_root, parallel)
    if not all(map(lt, paths, islice(paths, 1, None))):  # the walk emits sorted paths: a safety net
        order = sorted(range(len(paths)), key=paths.__getitem__)
        paths, sizes, exts = [paths[i] for i in order], [sizes[i] for i in order], [exts[i] for i in order]
    found_skipped.sort(key=_PATH)
    skipped = [SkippedEntry(path=path, reason=reason) for path, reason in found_skipped]
    # Counts and sizes straight from the columns, in C-level passes rather than a loop per file.
    kinds: list[Kind] = list(map(_KIND_OF_EXT.get, exts, repeat(_OTHER)))
    n_of = Counter(kinds)
    counts: dict[str, int] = {k: n_of[k] for k in KINDS}
    by_kind = {k: sum(compress(sizes, map(eq, kinds, repeat(k)))) for k in KINDS[:-1]}
    total = sum(sizes)
    by_kind["other"] = total - sum(by_kind.values())
    # Every part was built from typed values here: validating 100k entries again would cost more
    # than the walk itself.
    return ScanResult.model_construct(
        root=shown_name(real_root),
        files=FileList(paths, sizes, exts, kinds),
        counts=counts,
        sizes={k: by_kind[k] for k in KINDS},
        total_size=total,
        skipped=skipped,
    )
