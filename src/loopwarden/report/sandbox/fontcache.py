"""matplotlib's font list, read once per process and seeded into each figure child's fresh
MPLCONFIGDIR: without it every figure rebuilds the list by scanning the system's fonts (about a
second of CPU per figure). The list is the user's own (matplotlib's cache folder, found by a child
that runs no model code), filtered here to fonts the sandbox may read; no figure run ever writes a
list a later one trusts. Any failure: no seed, and the child builds its own list as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

BUILD = (
    "import matplotlib, pathlib\n"
    "matplotlib.use('Agg')\n"
    "from matplotlib import font_manager as fm\n"
    "fm.findfont('DejaVu Sans')\n"
    "print(pathlib.Path(matplotlib.get_cachedir(), f'fontlist-v{fm.FontManager.__version__}.json'))\n"
)
BUILD_WITHIN = 120.0

_lock = threading.Lock()
_built: list[tuple[str, dict[str, Any]] | None] = []


def _readable(fname: object, readable: tuple[str, ...]) -> bool:
    if not isinstance(fname, str):
        return False
    if not os.path.isabs(fname):  # stored relative to matplotlib's own data folder
        return True
    real = os.path.realpath(fname)
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in readable)


def _build() -> tuple[str, dict[str, Any]] | None:
    """The user's own matplotlib font list (made or refreshed by matplotlib in its cache folder,
    so usually only read), found by a child that imports matplotlib so this process need not."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", BUILD], env=env, capture_output=True, text=True, timeout=BUILD_WITHIN
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    path = Path(lines[-1])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (path.name, data) if isinstance(data, dict) and path.name.startswith("fontlist-v") else None


def seed(mpl_dir: Path, readable: list[str]) -> bool:
    """Write the font list into `mpl_dir` (a figure child's MPLCONFIGDIR); False if there is none."""
    with _lock:
        if not _built:
            _built.append(_build())
        built = _built[0]
    if built is None:
        return False
    name, data = built
    roots = tuple(os.path.realpath(p) for p in readable)
    kept = dict(data)
    for key in ("ttflist", "afmlist"):
        entries = data.get(key)
        if isinstance(entries, list):
            kept[key] = [e for e in entries if isinstance(e, dict) and _readable(e.get("fname"), roots)]
    (mpl_dir / name).write_text(json.dumps(kept), encoding="utf-8")
    return True
