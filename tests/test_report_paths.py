"""The path guard: each way out of the root is its own test, and each gets the same result."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden.report.folder.paths import OUT_OF_BOUNDS, OutOfBounds, PathGuard


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("inside")
    (root / "sub" / "b.txt").write_text("nested")
    sibling = tmp_path / "data2"
    sibling.mkdir()
    (sibling / "secret.txt").write_text("sibling secret")
    (tmp_path / "outside.txt").write_text("outside secret")
    return root, tmp_path


def read(guard: PathGuard, path: str) -> str:
    fd = guard.open_file(path)
    with os.fdopen(fd, "r") as f:
        return f.read()


def assert_refused(guard: PathGuard, path: str) -> None:
    with pytest.raises(OutOfBounds) as info:
        read(guard, path)
    assert str(info.value) == OUT_OF_BOUNDS


def test_inside_paths_open(layout: tuple[Path, Path]) -> None:
    guard = PathGuard(layout[0])
    assert read(guard, "a.txt") == "inside"
    assert read(guard, "sub/b.txt") == "nested"
    assert read(guard, "./sub/../a.txt") == "inside"


def test_parent_reference_is_refused(layout: tuple[Path, Path]) -> None:
    assert_refused(PathGuard(layout[0]), "../outside.txt")
    assert_refused(PathGuard(layout[0]), "sub/../../outside.txt")


def test_absolute_path_is_refused(layout: tuple[Path, Path]) -> None:
    guard = PathGuard(layout[0])
    assert_refused(guard, str(layout[1] / "outside.txt"))
    # Even an absolute path that names a file inside the root: the model must use relative paths.
    assert_refused(guard, str(layout[0] / "a.txt"))
    assert_refused(guard, "/etc/passwd")


def test_prefix_sibling_is_refused(layout: tuple[Path, Path]) -> None:
    # /x/data2 starts with the string /x/data but is not inside it.
    assert_refused(PathGuard(layout[0]), "../data2/secret.txt")


def test_symlink_to_outside_is_refused(layout: tuple[Path, Path]) -> None:
    root, base = layout
    (root / "escape.txt").symlink_to(base / "outside.txt")
    (root / "escape_dir").symlink_to(base / "data2")
    guard = PathGuard(root)
    assert_refused(guard, "escape.txt")
    assert_refused(guard, "escape_dir/secret.txt")


def test_symlink_inside_root_is_followed_to_its_target(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "alias.txt").symlink_to(root / "sub" / "b.txt")
    assert read(PathGuard(root), "alias.txt") == "nested"


def test_nul_byte_is_refused(layout: tuple[Path, Path]) -> None:
    assert_refused(PathGuard(layout[0]), "a.txt\x00.png")


def test_missing_file_is_refused(layout: tuple[Path, Path]) -> None:
    assert_refused(PathGuard(layout[0]), "nope.txt")


def test_fifo_is_refused_without_hanging(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    os.mkfifo(root / "pipe")
    assert_refused(PathGuard(root), "pipe")


def test_device_is_refused(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    (root / "null").symlink_to("/dev/null")  # outside anyway
    assert_refused(PathGuard(root), "null")
    if os.geteuid() == 0:  # only root may create a device node inside the folder
        os.mknod(root / "zero", 0o600 | 0o020000, os.makedev(1, 5))
        assert_refused(PathGuard(root), "zero")


def test_folder_is_not_a_file(layout: tuple[Path, Path]) -> None:
    assert_refused(PathGuard(layout[0]), "sub")


def test_symlink_swapped_in_between_check_and_open_is_not_followed(layout: tuple[Path, Path]) -> None:
    root, base = layout
    guard = PathGuard(root)
    checked = guard.check("a.txt")  # a regular file inside: passes the check
    (root / "a.txt").unlink()
    (root / "a.txt").symlink_to(base / "outside.txt")  # the race: swapped after the check
    with pytest.raises(OutOfBounds):
        guard.open_checked(checked)


def test_folder_swapped_for_symlink_between_check_and_open(layout: tuple[Path, Path]) -> None:
    root, base = layout
    guard = PathGuard(root)
    checked = guard.check("sub/b.txt")
    (root / "sub" / "b.txt").unlink()
    (root / "sub").rmdir()
    (base / "data2" / "b.txt").write_text("sibling")
    (root / "sub").symlink_to(base / "data2")  # a parent folder swapped for a link
    with pytest.raises(OutOfBounds):
        guard.open_checked(checked)


def test_open_dir(layout: tuple[Path, Path]) -> None:
    guard = PathGuard(layout[0])
    fd = guard.open_dir("sub")
    try:
        assert os.listdir(fd) == ["b.txt"]
    finally:
        os.close(fd)
    with pytest.raises(OutOfBounds):
        guard.open_dir("a.txt")
    with pytest.raises(OutOfBounds):
        guard.open_dir("..")


SEGMENTS = ["..", ".", "a.txt", "sub", "b.txt", "escape", "alias.txt", "", "/", "~", "\x00", "data2", "secret.txt"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6), lead=st.sampled_from(["", "/", "./"]))
def test_no_path_ever_opens_a_file_outside_the_root(layout: tuple[Path, Path], parts: list[str], lead: str) -> None:
    root, base = layout
    if not (root / "escape").exists():
        (root / "escape").symlink_to(base / "data2")
        (root / "alias.txt").symlink_to(root / "sub" / "b.txt")
    guard = PathGuard(root)
    path = lead + "/".join(parts)
    try:
        fd = guard.open_file(path)
    except OutOfBounds:
        return
    try:
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
    finally:
        os.close(fd)
    assert opened.is_relative_to(root.resolve())
