"""loopwarden's cache folder (report/cachedir.py): where the XDG base directory rules put it, and
files written there whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.report.cachedir import cache_dir, write_atomically


def test_the_cache_folder_follows_xdg_cache_home_when_it_is_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "loopwarden"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the spec says to ignore a relative one
    assert cache_dir() == tmp_path / "home" / ".cache" / "loopwarden"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == tmp_path / "home" / ".cache" / "loopwarden"


def test_a_file_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "memo.json"
    assert write_atomically(target, "first") and target.read_text() == "first"
    assert write_atomically(target, "second") and target.read_text() == "second"
    (tmp_path / "blocked").write_text("a file where a folder would go")
    assert not write_atomically(tmp_path / "blocked" / "memo.json", "x")
    assert sorted(p.name for p in target.parent.iterdir()) == ["memo.json"]  # no partial file left
