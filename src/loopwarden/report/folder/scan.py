"""The zero-LLM scan: list a data folder deterministically, bucketed by kind.

No model call, no file contents read. Hidden and VCS folders are skipped; symlinks are never
followed outside the root (a link to a file inside the root is listed, a linked folder is not
descended, so a link cycle cannot trap the scan).
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_left
from collections import Counter
from itertools import compress, islice, repeat
from operator import attrgetter, eq, lt, not_
from pathlib import Path

from pydantic import BaseModel, Field

from .listing import FileEntry, FileList, Kind, collector_paused, extensions
from .paths import shown_name

__all__ = [
    "KINDS",
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
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".git", ".hg", ".svn", ".ipynb_checkpoints"})


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
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def scan_folder(root: Path) -> ScanResult:
    """Scan `root` recursively; the listing is sorted, so two scans of one folder are equal."""
    real_root = os.path.realpath(root)
    out = _Columns()
    skipped: list[SkippedEntry] = []
    with collector_paused():
        _walk(real_root, out, skipped)
    paths, sizes, exts = out.paths, out.sizes, out.exts
    if not all(map(lt, paths, islice(paths, 1, None))):  # the walk emits sorted paths: a safety net
        order = sorted(range(len(paths)), key=paths.__getitem__)
        paths, sizes, exts = [paths[i] for i in order], [sizes[i] for i in order], [exts[i] for i in order]
    skipped.sort(key=attrgetter("path"))
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


class _Columns:
    """What the walk found, one value per listed file in each column, in path order."""

    __slots__ = ("exts", "paths", "sizes")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.sizes: list[int] = []
        self.exts: list[str] = []

    def add(self, rel: str, names: list[str], sizes: list[int]) -> None:
        self.paths += map(rel.__add__, names) if rel else names
        self.sizes += sizes
        self.exts += extensions(names)


# A pending step of the walk: (folder, rel, None, None) lists a folder; (folder, rel, names, sizes)
# emits files of that folder already listed and stat'ed, once everything sorting before them is out.
_Step = tuple[str, str, list[str] | None, list[int] | None]
_NAME = attrgetter("name")
_SIZE = attrgetter("st_size")
_IS_LINK = os.DirEntry.is_symlink
_IS_FILE = os.DirEntry.is_file
_IS_DIR = os.DirEntry.is_dir
_STAT = os.DirEntry.stat


def _walk(real_root: str, out: _Columns, skipped: list[SkippedEntry]) -> None:
    # An explicit stack, not recursion: deep trees must not hit Python's recursion limit.
    # Each folder is opened with O_NOFOLLOW (a folder swapped for a symlink after it was listed is
    # refused, not followed) and listed through its descriptor, so the one lstat per file is an
    # fstatat on the bare name, as `find` does, not a walk of the full path again: this loop is
    # what the 100k-file benchmark measures against `find`.
    # The steps are ordered so the files come out sorted by path (see `_list`): sorting 100k
    # paths afterwards (and the sizes and extensions with them) took ~50 ms, a fifth of the scan.
    stack: list[_Step] = [(real_root, "", None, None)]
    while stack:
        current, rel, names, sizes = stack.pop()
        if names is not None and sizes is not None:
            out.add(rel, names, sizes)
            continue
        try:
            fd = os.open(current, _DIR_FLAGS)
        except OSError as error:
            skipped.append(SkippedEntry(path=rel[:-1] or ".", reason=f"unreadable folder: {error.strerror}"))
            continue
        try:
            _list(fd, current, rel, real_root, out, skipped, stack)
        except OSError as error:
            skipped.append(SkippedEntry(path=rel[:-1] or ".", reason=f"unreadable folder: {error.strerror}"))
        finally:
            os.close(fd)


def _list(
    fd: int, current: str, rel: str, real_root: str, out: _Columns, skipped: list[SkippedEntry], stack: list[_Step]
) -> None:
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=_NAME)  # so `names` below comes out sorted
    real: dict[str, str] = {}
    plain = _plain(entries)
    if plain is not None:
        names, sizes, folders = plain
    else:
        names, sizes, folders = _sort_out(entries, current, rel, real_root, skipped, real)
    # Sorted paths from sorted steps: everything under folder "d" starts with rel + "d/", and no
    # file name holds a "/", so it sorts among its folder's files exactly where "d/" does. The
    # folder's files are cut at each subfolder's "d/"; the files before the first one are next
    # in order and go out now (a folder without subfolders never touches the stack).
    if real:  # a shown name may sort elsewhere than the real one did
        order = sorted(range(len(names)), key=names.__getitem__)
        names, sizes = [names[i] for i in order], [sizes[i] for i in order]
    folders.sort()
    lo = bisect_left(names, folders[0]) if folders else len(names)
    out.add(rel, names[:lo], sizes[:lo])
    steps: list[_Step] = []
    for i, folder in enumerate(folders, 1):
        steps.append((os.path.join(current, real.get(folder[:-1], folder[:-1])), rel + folder, None, None))
        hi = bisect_left(names, folders[i], lo) if i < len(folders) else len(names)
        if hi > lo:
            steps.append((current, rel, names[lo:hi], sizes[lo:hi]))
        lo = hi
    stack += reversed(steps)


def _plain(entries: list[os.DirEntry[str]]) -> tuple[list[str], list[int], list[str]] | None:
    """(file names, sizes, "folder/" names) of a folder holding only regular files and folders
    with names shown as they are, none hidden or skipped; None for any other folder.

    The common case, done in C-level passes over the folder rather than Python code per entry
    (`_sort_out` below, the general case, gives the same result for such a folder;
    tests/test_report_scan_fast.py checks the two against each other). With no link in the folder,
    `is_file()` and `stat()` without `follow_symlinks=False` read the same `d_type` and make the
    same descriptor-relative lstat.
    """
    names = list(map(_NAME, entries))
    joined = "/".join(names)  # no name holds a "/"
    if not joined.isascii():
        try:
            joined.encode("utf-8")
        except UnicodeEncodeError:  # undecodable bytes: shown as \xNN, which may sort elsewhere
            return None
    if joined[:1] == "." or "/." in joined or not SKIPPED_DIRS.isdisjoint(names) or any(map(_IS_LINK, entries)):
        return None
    is_file = list(map(_IS_FILE, entries))
    if all(is_file):
        files, folders = entries, []
    else:
        others = list(compress(entries, map(not_, is_file)))
        if not all(map(_IS_DIR, others)):  # a FIFO, socket or device
            return None
        files, folders = list(compress(entries, is_file)), [entry.name + "/" for entry in others]
        names = list(compress(names, is_file))
    try:
        sizes: list[int] = list(map(_SIZE, map(_STAT, files)))
    except OSError:  # a file removed or replaced since the listing: the general case says which
        return None
    return names, sizes, folders


def _sort_out(
    entries: list[os.DirEntry[str]],
    current: str,
    rel: str,
    real_root: str,
    skipped: list[SkippedEntry],
    real: dict[str, str],
) -> tuple[list[str], list[int], list[str]]:
    """(file names, sizes, "folder/" names) of any folder, entry by entry; what is left out goes
    to `skipped`, and a name shown otherwise than it is named goes to `real` (shown -> real)."""
    names: list[str] = []
    sizes: list[int] = []
    folders: list[str] = []
    for entry in entries:
        name = shown_name(entry.name)  # file names are bytes: undecodable ones are shown as \xNN
        if name is not entry.name:
            real[name] = entry.name
        if name[0] == "." or name in SKIPPED_DIRS:
            skipped.append(SkippedEntry(path=rel + name, reason="hidden or VCS"))
        elif entry.is_file(follow_symlinks=False):
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:  # removed or replaced between the listing and the stat
                skipped.append(SkippedEntry(path=rel + name, reason="vanished during the scan"))
                continue
            names.append(name)
            sizes.append(size)
        elif entry.is_dir(follow_symlinks=False):
            folders.append(name + "/")
        elif entry.is_symlink():
            link_size = _link_size(os.path.join(current, entry.name), rel + name, real_root, skipped)
            if link_size is not None:
                names.append(name)
                sizes.append(link_size)
        else:
            skipped.append(SkippedEntry(path=rel + name, reason="not a regular file (FIFO, socket or device)"))
    return names, sizes, folders


def _link_size(link: str, rel_path: str, real_root: str, skipped: list[SkippedEntry]) -> int | None:
    """The size of the regular file a link inside the root points to; None (and why, in
    `skipped`) for a link leading outside, a broken one or one to a folder (never descended)."""
    target = Path(os.path.realpath(link))
    if not target.is_relative_to(real_root):
        skipped.append(SkippedEntry(path=rel_path, reason="symlink pointing outside the folder"))
        return None
    try:
        info = os.stat(target, follow_symlinks=False)
    except OSError:
        skipped.append(SkippedEntry(path=rel_path, reason="broken symlink"))
        return None
    if stat.S_ISREG(info.st_mode):
        return info.st_size
    skipped.append(SkippedEntry(path=rel_path, reason="symlink to a folder inside the root (not descended)"))
    return None
