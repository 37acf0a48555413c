"""report/atomic.py: the report's outputs and cache entries are written whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.report.atomic import atomic_write


def test_a_write_replaces_the_file_whole_and_a_failed_one_leaves_it_and_no_partial(tmp_path: Path) -> None:
    target = tmp_path / "report.tex"
    atomic_write(target, "first")
    atomic_write(target, "second")
    assert target.read_text() == "second"
    taken = tmp_path / "taken"  # a folder where the file would go: the rename fails
    taken.mkdir()
    with pytest.raises(OSError):
        atomic_write(taken, "lost")
    assert taken.is_dir() and target.read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.tex", "taken"]  # no partial file left
