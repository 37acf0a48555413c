"""The scan's fast path (`_plain`: a folder of plain files and folders, done in C-level passes)
against the general one and against a straightforward reference walk, on generated trees with
the awkward cases: hidden and VCS names, names that sort around a folder's "name/", newlines,
accents and bytes that are not UTF-8, links (to a file or folder inside, outside, broken), FIFOs
and empty folders."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from loopwarden.report.folder.scan import SKIPPED_DIRS, extension, kind_of, scan_folder
from loopwarden.report.folder.walk import _plain, _sort_out

# "-" < "." < "/" < "0": names that sort just before and after a folder's "name/" prefix. No
# backslash: a name shown with \xNN must not collide with one really spelled that way.
plain_names = st.text(alphabet="a-.0Z_\né", min_size=1, max_size=4).filter(lambda n: n not in {".", ".."})
SPECIAL = (".git", "node_modules", "__pycache__", "x.CSV", "Makefile")
# A special name a quarter of the time; else a drawn one, led by "." (hidden) or by "-" or "\n",
# which sort before ".", so that a hidden name is not always a folder's first.
names = st.tuples(st.integers(0, 19), st.sampled_from(["", "", "", ".", "-", "\n"]), plain_names).map(
    lambda t: SPECIAL[t[0]] if t[0] < len(SPECIAL) else t[1] + t[2]
)
KINDS = ("file", "file", "file", "folder", "link_file", "link_folder", "link_out", "link_broken", "fifo")
# (parent: indexes of earlier entries, name, kind, size, one byte that is not UTF-8 appended)
entries = st.lists(
    st.tuples(
        st.lists(st.integers(0, 30), max_size=2),
        names,
        st.sampled_from(KINDS),
        st.integers(0, 40),
        st.integers(0, 9).map(lambda n: n == 9),
    ),
    max_size=30,
)


def build(base: Path, spec: list[tuple[list[int], str, str, int, bool]]) -> bytes:
    """The tree of `spec` under base/data (links out point into base/outside); its real root."""
    root, outside = os.fsencode(base / "data"), os.fsencode(base / "outside")
    os.mkdir(root)
    os.mkdir(outside)
    with open(os.path.join(outside, b"secret.csv"), "wb") as f:
        f.write(b"secret")
    folders: list[bytes] = [root]
    files: list[bytes] = []
    for parents, name, kind, size, odd in spec:
        # Each entry goes into a folder made earlier (the drawn indexes pick which).
        parent = folders[parents[0] % len(folders)] if parents else root
        path = os.path.join(parent, os.fsencode(name) + (b"\xff" if odd else b""))
        if os.path.lexists(path):
            continue
        if kind == "file":
            with open(path, "wb") as f:
                f.write(b"x" * size)
            files.append(path)
        elif kind == "folder":
            os.mkdir(path)
            folders.append(path)
        elif kind == "link_file" and files:
            os.symlink(files[size % len(files)], path)
        elif kind == "link_folder":
            os.symlink(folders[size % len(folders)], path)
        elif kind == "link_out":
            os.symlink(os.path.join(outside, b"secret.csv"), path)
        elif kind == "link_broken":
            os.symlink(os.path.join(root, b"gone"), path)
        elif kind == "fifo":
            os.mkfifo(path)
    return os.path.realpath(root)


def reference(real_root: bytes) -> tuple[list[tuple[str, int]], list[tuple[str, str]]]:
    """(path, size) of every listed file and (path, reason) of every skipped entry, by a plain
    recursive walk on byte paths."""
    files: list[tuple[str, int]] = []
    skipped: list[tuple[str, str]] = []

    def visit(folder: bytes, rel: str) -> None:
        for raw in os.listdir(folder):
            name, path = raw.decode("utf-8", "backslashreplace"), os.path.join(folder, raw)
            mode = os.lstat(path).st_mode
            if name.startswith(".") or name in SKIPPED_DIRS:
                skipped.append((rel + name, "hidden or VCS"))
            elif stat.S_ISREG(mode):
                files.append((rel + name, os.lstat(path).st_size))
            elif stat.S_ISDIR(mode):
                visit(path, rel + name + "/")
            elif stat.S_ISLNK(mode):
                target = os.path.realpath(path)
                if not (target == real_root or target.startswith(real_root + b"/")):
                    skipped.append((rel + name, "symlink pointing outside the folder"))
                elif not os.path.lexists(target):
                    skipped.append((rel + name, "broken symlink"))
                elif os.path.isdir(target):
                    skipped.append((rel + name, "symlink to a folder inside the root (not descended)"))
                else:
                    files.append((rel + name, os.stat(target).st_size))
            else:
                skipped.append((rel + name, "not a regular file (FIFO, socket or device)"))

    visit(real_root, "")
    return sorted(files), sorted(skipped)


HIDDEN_AFTER_ANOTHER = [([], "-a", "file", 1, False), ([], ".x", "file", 1, False)]


@given(entries)
@example(HIDDEN_AFTER_ANOTHER)
def test_scan_equals_a_reference_walk(tmp_path_factory, spec) -> None:  # type: ignore[no-untyped-def]
    real_root = build(tmp_path_factory.mktemp("tree"), spec)
    scan = scan_folder(Path(os.fsdecode(real_root)))
    files, skipped = reference(real_root)
    assert scan.files.paths() == [path for path, _ in files]
    assert [(f.path, f.size, f.ext, f.kind) for f in scan.files] == [
        (path, size, extension(path.rsplit("/", 1)[-1]), kind_of(extension(path.rsplit("/", 1)[-1])))
        for path, size in files
    ]
    assert [(s.path, s.reason) for s in scan.skipped] == skipped
    assert scan.total_size == sum(size for _, size in files)


@given(entries)
@example(HIDDEN_AFTER_ANOTHER)
def test_the_fast_path_equals_the_general_one(tmp_path_factory, spec) -> None:  # type: ignore[no-untyped-def]
    # Every folder of the tree, whole and without its links and FIFOs (so that the checks on
    # names meet folders of files and folders often): where the fast path answers, the general
    # one gives the same names, sizes and folders with nothing skipped or renamed; and it answers
    # for every listing that has only files and folders with valid, visible names.
    real_root = build(tmp_path_factory.mktemp("tree"), spec)
    for folder, _, _ in os.walk(real_root):
        for only_regular in (False, True):
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fast = _plain(listed(fd, only_regular))
                skipped: list[object] = []
                real: dict[str, str] = {}
                general = _sort_out(listed(fd, only_regular), os.fsdecode(folder), "", "", skipped, real)  # type: ignore[arg-type]
            finally:
                os.close(fd)
            shown = [raw for raw in os.listdir(folder) if not only_regular or regular(os.path.join(folder, raw))]
            plain = all(
                not raw.startswith(b".")
                and os.fsdecode(raw) not in SKIPPED_DIRS
                and _utf8(raw)
                and regular(os.path.join(folder, raw))
                for raw in shown
            )
            assert (fast is not None) == plain, (folder, shown)
            if fast is not None:
                assert fast == general and skipped == [] and real == {}


def listed(fd: int, only_regular: bool) -> list[os.DirEntry[str]]:
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    if only_regular:
        entries = [
            entry for entry in entries if entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)
        ]
    return entries


def regular(path: bytes) -> bool:
    mode = os.lstat(path).st_mode
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def test_the_fast_path_is_taken_for_plain_folders(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d-1.csv").write_bytes(b"12")
    (tmp_path / "é.md").write_bytes(b"")
    with os.scandir(tmp_path) as listing:
        assert _plain(sorted(listing, key=lambda entry: entry.name)) == (["d-1.csv", "é.md"], [2, 0], ["d/"])


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
