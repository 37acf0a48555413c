"""The figure child's font list is built once per process by a trusted child and seeded into each
figure's fresh MPLCONFIGDIR (report/sandbox/fontcache.py): matplotlib uses it as it is, and it
names only fonts the sandbox may read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopwarden.report.sandbox import fontcache
from loopwarden.report.sandbox.runner import FONT_READABLE, python_paths

USE = "from matplotlib import font_manager\nprint(font_manager.findfont('DejaVu Sans'))\n"


def test_a_seeded_font_list_is_used_by_matplotlib_without_a_rebuild(tmp_path: Path) -> None:
    readable = FONT_READABLE + python_paths()
    assert fontcache.seed(tmp_path, readable)
    (seeded,) = tmp_path.glob("fontlist-v*.json")
    before = seeded.read_bytes()
    os.utime(seeded, (1, 1))
    env = {"MPLCONFIGDIR": str(tmp_path), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-I", "-c", USE], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip().endswith(".ttf"), done.stdout + done.stderr
    assert seeded.stat().st_mtime == 1 and seeded.read_bytes() == before  # read, not rebuilt


def test_the_seed_names_only_fonts_the_sandbox_can_read(tmp_path: Path) -> None:
    readable = python_paths()  # no system font folder: every system font is left out
    assert fontcache.seed(tmp_path, readable)
    (seeded,) = tmp_path.glob("fontlist-v*.json")
    listed = json.loads(seeded.read_text())["ttflist"]
    assert listed  # matplotlib's own fonts stay
    roots = [os.path.realpath(p) for p in readable]
    for entry in listed:
        name = entry["fname"]
        assert not os.path.isabs(name) or any(os.path.realpath(name).startswith(r + "/") for r in roots), name


def _fake_finder(monkeypatch: pytest.MonkeyPatch, listed: Path) -> list[object]:
    """subprocess.run as fontcache calls it, answering with `listed`'s path; returns its calls."""
    calls: list[object] = []

    def run(argv: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=f"{listed}\n", stderr="")

    monkeypatch.setattr(fontcache.subprocess, "run", run)
    return calls


def _font_list(path: Path, font: Path) -> Path:
    entries = [{"fname": str(font), "name": "Test"}, {"fname": "fonts/ttf/DejaVuSans.ttf", "name": "DejaVu Sans"}]
    path.write_text(json.dumps({"_version": "test", "ttflist": entries, "afmlist": []}), encoding="utf-8")
    return path


def test_where_the_font_list_lies_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fontcache, "_memo_file", lambda: tmp_path / "memo.json")
    font = tmp_path / "Test.ttf"
    font.write_bytes(b"font")
    listed = _font_list(tmp_path / "fontlist-vtest.json", font)
    calls = _fake_finder(monkeypatch, listed)
    first = fontcache._build()
    assert first is not None and first[0] == listed.name and len(calls) == 1
    assert fontcache._build() == first and len(calls) == 1  # a later process: read where the memo says
    _font_list(listed, font)  # the list is read afresh each time, only its place is remembered
    assert fontcache._build() == first and len(calls) == 1


def test_the_font_list_is_found_again_when_the_memo_is_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memo = tmp_path / "memo.json"
    monkeypatch.setattr(fontcache, "_memo_file", lambda: memo)
    font = tmp_path / "Test.ttf"
    font.write_bytes(b"font")
    listed = _font_list(tmp_path / "fontlist-vtest.json", font)
    calls = _fake_finder(monkeypatch, listed)
    assert fontcache._build() is not None and len(calls) == 1
    saved = json.loads(memo.read_text())
    memo.write_text(json.dumps({**saved, "key": [*saved["key"][:-1], "/another/home"]}))  # HOME changed
    assert fontcache._build() is not None and len(calls) == 2
    font.unlink()  # a font the list names is gone: matplotlib would rebuild the list
    assert fontcache._build() is not None and len(calls) == 3
    listed.unlink()  # the list itself is gone, and the finder names none
    assert fontcache._build() is None and len(calls) == 4
