"""matplotlib's font list, read once per process and seeded into each figure child's fresh
MPLCONFIGDIR: without it every figure rebuilds the list by scanning the system's fonts (about a
second of CPU per figure). The list is the user's own (matplotlib's cache folder, found by a child
that runs no model code), filtered here to fonts the sandbox may read; no figure run ever writes a
list a later one trusts. Any failure: no seed, and the child builds its own list as before.

Where that list lies is remembered per interpreter and matplotlib install (a small memo in
loopwarden's cache folder, cachedir.py): the finding child imports matplotlib, about half a
second of CPU that every report paid again for the same answer. The list itself is still read
fresh by each process, and it is found anew when the memo's key no longer matches or a font it
names is gone (what would have made matplotlib rebuild it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from ..cachedir import cache_dir, write_atomically

BUILD = (
    "import matplotlib, pathlib\n"
    "matplotlib.use('Agg')\n"
    "from matplotlib import font_manager as fm\n"
    "fm.findfont('DejaVu Sans')\n"
    "print(pathlib.Path(matplotlib.get_cachedir(), f'fontlist-v{fm.FontManager.__version__}.json'))\n"
)
BUILD_WITHIN = 120.0
MEMO = "fontlist-path.json"

_lock = threading.Lock()
_built: list[tuple[str, dict[str, Any]] | None] = []


def _readable(fname: object, readable: tuple[str, ...]) -> bool:
    if not isinstance(fname, str):
        return False
    if not os.path.isabs(fname):  # stored relative to matplotlib's own data folder
        return True
    real = os.path.realpath(fname)
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in readable)


def _memo_file() -> Path | None:
    folder = cache_dir()
    return folder / MEMO if folder is not None else None


def _memo_key() -> list[str] | None:
    """What the list's place depends on: the interpreter, matplotlib's install (its font_manager.py
    changes with every upgrade, and so may the list's name) and the variables matplotlib's cache
    folder follows. find_spec of a top-level package does not import it."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or spec.origin is None:
        return None
    manager = Path(spec.origin).with_name("font_manager.py")
    try:
        stat = manager.stat()
    except OSError:
        return None
    env = [os.environ.get(name, "") for name in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "HOME")]
    return [sys.executable, str(manager), str(stat.st_mtime_ns), str(stat.st_size), *env]


def _read_list(path: Path) -> tuple[str, dict[str, Any]] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (path.name, data) if isinstance(data, dict) and path.name.startswith("fontlist-v") else None


def _fonts_present(data: dict[str, Any]) -> bool:
    """Every font the list names by absolute path is still there (relative ones are matplotlib's own)."""
    for key in ("ttflist", "afmlist"):
        for entry in data.get(key) or ():
            fname = entry.get("fname") if isinstance(entry, dict) else None
            if isinstance(fname, str) and os.path.isabs(fname) and not os.path.exists(fname):
                return False
    return True


def _remembered(key: list[str]) -> tuple[str, dict[str, Any]] | None:
    memo = _memo_file()
    try:
        saved = json.loads(memo.read_text(encoding="utf-8")) if memo is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("key") != key or not isinstance(saved.get("path"), str):
        return None
    built = _read_list(Path(saved["path"]))
    return built if built is not None and _fonts_present(built[1]) else None


def _remember(key: list[str], path: Path) -> None:
    memo = _memo_file()
    if memo is not None:  # not written (a read-only cache): the child finds the list each time
        write_atomically(memo, json.dumps({"key": key, "path": str(path)}))


def _build() -> tuple[str, dict[str, Any]] | None:
    """The user's own matplotlib font list (made or refreshed by matplotlib in its cache folder,
    so usually only read): where the memo says, else found by a child that imports matplotlib so
    this process need not."""
    key = _memo_key()
    if key is not None and (known := _remembered(key)) is not None:
        return known
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
    built = _read_list(path)
    if built is not None and key is not None:
        _remember(key, path)
    return built


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
