"""The scan's columnar listing (`FileList`): entries built on first use must be indistinguishable
from an eagerly built, validated `list[FileEntry]` — equality, every dump, JSON schema, copies."""

from __future__ import annotations

import copy
import gc
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loopwarden.report.folder.listing import FileList, extensions
from loopwarden.report.folder.scan import (
    KINDS,
    SKIPPED_DIRS,
    FileEntry,
    ScanResult,
    extension,
    kind_of,
    scan_folder,
)
from loopwarden.report.folder.walk import Columns, walk

# "-" < "." < "/" < "0": names that sort just before and after a folder's "name/" prefix.
names = st.text(alphabet="a-.0A_", min_size=1, max_size=4).filter(lambda n: n not in {".", ".."})


def make_tree(root: Path, spec: list[tuple[tuple[str, ...], str, int]]) -> dict[str, int]:
    """Create the files of `spec` that do not clash (a file where a folder is, or the reverse)."""
    files: dict[str, int] = {}
    for dirs, name, size in spec:
        rel = "/".join([*dirs, name])
        if rel in files or any(rel.startswith(o + "/") or o.startswith(rel + "/") for o in files):
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        files[rel] = size
    return files


def eager(root: str, files: dict[str, int], skipped: object) -> ScanResult:
    """The listing as a validated list of validated entries, counted the plain way."""
    visible = sorted(p for p in files if not any(c[0] == "." or c in SKIPPED_DIRS for c in p.split("/")))
    entries = []
    for path in visible:
        ext = extension(path.rsplit("/", 1)[-1])
        entries.append(FileEntry(path=path, size=files[path], kind=kind_of(ext), ext=ext))
    counts = {k: sum(1 for e in entries if e.kind == k) for k in KINDS}
    sizes = {k: sum(e.size for e in entries if e.kind == k) for k in KINDS}
    return ScanResult.model_validate(
        {
            "root": root,
            "files": entries,
            "counts": counts,
            "sizes": sizes,
            "total_size": sum(sizes.values()),
            "skipped": skipped,
        }
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(names, max_size=3).map(tuple), names, st.integers(0, 40)), max_size=25))
def test_lazy_listing_equals_the_eager_one(tmp_path_factory, spec) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("tree")
    files = make_tree(root, spec)
    scan = scan_folder(root)
    reference = eager(scan.root, files, scan.skipped)
    assert scan.files._entries is None  # nothing built yet: the dumps below must build it right
    assert scan.model_dump_json() == reference.model_dump_json()
    assert scan.model_dump() == reference.model_dump()
    assert scan == reference and reference == scan
    assert scan.files == reference.files and [f.path for f in scan.files] == [f.path for f in reference.files]
    # The walk itself emits sorted paths (the sort after it is only a safety net).
    out = Columns()
    walk(str(root.resolve()), "", str(root.resolve()), out)
    assert out.paths == sorted(out.paths)
    assert out.sizes == [files[p] for p in out.paths]


@given(st.lists(names | st.text(max_size=6), max_size=30))
def test_extensions_match_extension(batch: list[str]) -> None:
    batch = [n for n in batch if n]
    assert extensions(batch) == [extension(n) for n in batch]


def test_nothing_is_built_for_counts_length_or_equality(tmp_path: Path) -> None:
    make_tree(tmp_path, [((), "a.csv", 2), (("d",), "b.png", 3), ((), "c", 1)])
    first, second = scan_folder(tmp_path), scan_folder(tmp_path)
    assert len(first.files) == 3 and first.files and first.counts["data"] == 1 and first.sizes["images"] == 3
    assert first == second and first.summary().startswith("3 files")
    assert pickle.loads(pickle.dumps(first)) == first and copy.deepcopy(first) == first
    (tmp_path / "c").write_bytes(b"xy")
    assert scan_folder(tmp_path).files != first.files  # unbuilt listings compare by their columns
    assert first.files._entries is None and second.files._entries is None
    assert ScanResult(root="x").files == [] and not ScanResult(root="x").files


def test_entries_behave_like_a_list_once_built(tmp_path: Path) -> None:
    make_tree(tmp_path, [((), "a.csv", 2), (("d",), "b.png", 3), ((), "c", 1)])
    scan = scan_folder(tmp_path)
    first = scan.files[0]
    assert first is scan.files[0] and next(iter(scan.files)) is first
    assert isinstance(scan.files[:2], list) and [f.path for f in scan.files[1:]] == ["c", "d/b.png"]
    assert [f.path for f in reversed(scan.files)] == ["d/b.png", "c", "a.csv"]
    assert scan.of_kind("images")[0].path == "d/b.png"
    first.size = 9  # changed in place, as in a list: the dump and equality see it
    assert scan.model_dump()["files"][0]["size"] == 9
    assert scan != scan_folder(tmp_path)
    with pytest.raises(TypeError):
        hash(scan.files)


def test_copies_round_trips_and_dump_options_match_the_eager_listing(tmp_path: Path) -> None:
    files = make_tree(tmp_path, [((), "a.csv", 2), (("d",), "b.png", 3), ((), "c", 1), ((".h",), "x", 1)])
    scan = scan_folder(tmp_path)
    reference = eager(scan.root, files, scan.skipped)
    for options in ({"mode": "json"}, {"exclude": {"files": {0: {"size"}}}}, {"include": {"files": {1}, "root": True}}):
        assert scan.model_dump(**options) == reference.model_dump(**options)  # type: ignore[arg-type]
    pretty = {"indent": 2, "exclude": {"skipped"}}
    assert scan.model_dump_json(**pretty) == reference.model_dump_json(**pretty)  # type: ignore[arg-type]
    assert ScanResult.model_validate_json(scan.model_dump_json()) == scan
    assert pickle.loads(pickle.dumps(scan)) == scan and copy.deepcopy(scan) == scan
    deep = scan.model_copy(deep=True)
    deep.files[0].size = 99
    assert scan.files[0].size == 2  # a deep copy does not share entries
    assert ScanResult(root="x", files=scan.files).files is scan.files  # a listing given as input is kept

    class Eager(BaseModel):
        files: list[FileEntry]

    assert ScanResult.model_json_schema()["properties"]["files"] == Eager.model_json_schema()["properties"]["files"]


def test_columns_must_line_up() -> None:
    with pytest.raises(ValueError, match="one value per file"):
        FileList(["a"], [1], [], [])


def test_building_entries_leaves_the_garbage_collector_as_it_was(tmp_path: Path) -> None:
    make_tree(tmp_path, [((), "a.csv", 2), ((), "b.md", 1)])
    assert gc.isenabled()
    scan_folder(tmp_path).files.entries()
    assert gc.isenabled()
    gc.disable()
    try:
        scan_folder(tmp_path).files.entries()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_paths_come_from_the_columns_until_entries_exist(tmp_path: Path) -> None:
    make_tree(tmp_path, [((), "a.csv", 2), (("d",), "b.png", 3), ((), "c", 1)])
    scan = scan_folder(tmp_path)
    assert scan.detail(max_files=2)["files"] == ["a.csv", "c"] and scan.files.paths() == ["a.csv", "c", "d/b.png"]
    assert scan.files._entries is None  # the scan's progress event builds no entry
    scan.files[0].path = "renamed.csv"
    assert scan.files.paths(1) == ["renamed.csv"]
