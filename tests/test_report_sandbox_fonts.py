"""The figure child's font list is built once per process by a trusted child and seeded into each
figure's fresh MPLCONFIGDIR (report/sandbox/fontcache.py): matplotlib uses it as it is, and it
names only fonts the sandbox may read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    import json

    readable = python_paths()  # no system font folder: every system font is left out
    assert fontcache.seed(tmp_path, readable)
    (seeded,) = tmp_path.glob("fontlist-v*.json")
    listed = json.loads(seeded.read_text())["ttflist"]
    assert listed  # matplotlib's own fonts stay
    roots = [os.path.realpath(p) for p in readable]
    for entry in listed:
        name = entry["fname"]
        assert not os.path.isabs(name) or any(os.path.realpath(name).startswith(r + "/") for r in roots), name
