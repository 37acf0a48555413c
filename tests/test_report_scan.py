from __future__ import annotations

import gc
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.report.folder.scan import FileEntry, ScanResult, kind_of, scan_folder


def make(root: Path, files: dict[str, bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def test_buckets_counts_sizes_and_listing(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "notes.md": b"# notes",
            "paper.PDF": b"%PDF-1.4",
            "run1/scan.csv": b"x,y\n1,2\n",
            "run1/params.yaml": b"a: 1",
            "figs/plot.png": b"\x89PNG....",
            "blob.bin": b"\x00" * 10,
            "Makefile": b"all:",
        },
    )
    scan = scan_folder(tmp_path)
    assert [f.path for f in scan.files] == sorted(
        ["notes.md", "paper.PDF", "run1/scan.csv", "run1/params.yaml", "figs/plot.png", "blob.bin", "Makefile"]
    )
    assert scan.counts == {"documents": 2, "images": 1, "data": 2, "other": 2}
    assert scan.sizes["data"] == 8 + 4
    assert scan.total_size == sum(f.size for f in scan.files)
    by_path = {f.path: f for f in scan.files}
    assert by_path["paper.PDF"].ext == "pdf" and by_path["paper.PDF"].kind == "documents"
    assert by_path["Makefile"].ext == "" and by_path["Makefile"].kind == "other"


def test_hidden_and_vcs_folders_are_skipped(tmp_path: Path) -> None:
    make(tmp_path, {".git/config": b"x", ".hidden/a.csv": b"x", "__pycache__/m.pyc": b"x", "keep.csv": b"x"})
    scan = scan_folder(tmp_path)
    assert [f.path for f in scan.files] == ["keep.csv"]
    assert {s.path for s in scan.skipped} == {".git", ".hidden", "__pycache__"}


def test_symlinks_are_not_followed_outside(tmp_path: Path) -> None:
    root = tmp_path / "data"
    outside = tmp_path / "outside"
    make(root, {"a.csv": b"1"})
    make(outside, {"secret.csv": b"secret", "deep/x.csv": b"x"})
    (root / "link_file.csv").symlink_to(outside / "secret.csv")
    (root / "link_dir").symlink_to(outside)
    (root / "alias.csv").symlink_to(root / "a.csv")
    (root / "loop").symlink_to(root)  # a cycle: must not be descended
    scan = scan_folder(root)
    assert [f.path for f in scan.files] == ["a.csv", "alias.csv"]
    reasons = {s.path: s.reason for s in scan.skipped}
    assert "outside" in reasons["link_file.csv"] and "outside" in reasons["link_dir"]
    assert "loop" in reasons


def test_fifo_is_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    scan = scan_folder(tmp_path)
    assert scan.files == [] and scan.skipped[0].path == "pipe"


def test_detail_is_bounded(tmp_path: Path) -> None:
    make(tmp_path, {f"f{i:03}.csv": b"1" for i in range(30)})
    detail = scan_folder(tmp_path).detail(max_files=10)
    assert detail["n_files"] == 30 and len(detail["files"]) == 10 and detail["truncated"] is True  # type: ignore[arg-type]


names = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=8)


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.lists(names, max_size=2).map(tuple), names, st.sampled_from(["csv", "md", "png", "x"])),
        st.binary(max_size=20),
        max_size=12,
    )
)
def test_scan_is_deterministic_and_complete(tmp_path_factory, spec) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("scan")
    files: dict[str, bytes] = {}
    for (dirs, stem, ext), content in spec.items():
        rel = "/".join([*(f"d_{d}" for d in dirs), f"{stem}.{ext}"])
        if any(rel.startswith(other + "/") or other.startswith(rel + "/") for other in files):
            continue
        files[rel] = content
    make(root, files)
    first, second = scan_folder(root), scan_folder(root)
    assert first == second
    assert {f.path: f.size for f in first.files} == {rel: len(c) for rel, c in files.items()}
    assert all(f.kind == kind_of(f.ext) for f in first.files)


def test_listed_entries_behave_like_validated_models(tmp_path: Path) -> None:
    # The listing is built without per-file validation: it must be indistinguishable from a
    # validated one (equality, dumps, JSON round trip, copies that do not leak into each other).
    make(tmp_path, {"a/x.CSV": b"12", "b.md": b"", "c": b"xyz"})
    scan = scan_folder(tmp_path)
    for entry in scan.files:
        validated = FileEntry(**entry.model_dump())
        assert entry == validated and validated == entry
        assert entry.model_dump() == validated.model_dump() and entry.model_fields_set == validated.model_fields_set
    assert ScanResult.model_validate_json(scan.model_dump_json()) == scan
    assert ScanResult.model_validate(scan.model_dump()).files[0].kind == "data"
    first, second = scan.files[0], scan.files[1]
    changed = first.model_copy(update={"size": 99})
    first.size = 7
    assert changed.size == 99 and first.size == 7 and second.size != 7
    assert second.model_fields_set == {"path", "size", "kind", "ext"}


def test_a_tree_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    deep = "/".join(["d"] * 1100)  # > sys.getrecursionlimit() by default
    folder = tmp_path
    for _ in range(1100):  # one level at a time: mkdir(parents=True) recurses as well
        folder = folder / "d"
        folder.mkdir()
    make(tmp_path, {f"{deep}/leaf.txt": b"ok", "top.txt": b"1"})
    try:
        scan = scan_folder(tmp_path)
        assert [f.path for f in scan.files] == [f"{deep}/leaf.txt", "top.txt"]
    finally:  # pytest's recursive clean-up of old temp folders would fail on this tree
        (folder / "leaf.txt").unlink()
        while folder != tmp_path:
            folder.rmdir()
            folder = folder.parent


def test_the_garbage_collector_is_left_as_it_was(tmp_path: Path) -> None:
    make(tmp_path, {"a.csv": b"1"})
    assert gc.isenabled()
    scan_folder(tmp_path)
    assert gc.isenabled()
    gc.disable()
    try:
        scan_folder(tmp_path)
        assert not gc.isenabled()
    finally:
        gc.enable()
