"""Which renderer draws the window. Qt WebEngine's view is drawn by Qt Quick, on OpenGL by default;
on a machine with no GPU (a VM, a container, a remote or virtual X server) that OpenGL is Mesa's
llvmpipe, which emulates a GPU on the CPU: every repaint of the page (a timeline line, the progress
bar) then cost well over twice the CPU of Qt Quick's own software renderer drawing the same pixels
(a launch whose page then appends 60 lines in 9 s, under Xvfb: 4.4 s of CPU against 2.5 s). With no
GPU device node, OpenGL can only be software, so the software renderer is chosen; with one, Qt's
default stays."""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

# A GPU's device nodes: DRM (Mesa's hardware drivers, virtio-gpu) and NVIDIA's proprietary driver.
_GPU_NODES = ("dri/renderD*", "dri/card*", "nvidia[0-9]*")


def has_gpu(dev: Path = Path("/dev")) -> bool:
    return any(any(dev.glob(pattern)) for pattern in _GPU_NODES)


def choose_renderer(environ: MutableMapping[str, str] | None = None, dev: Path = Path("/dev")) -> str | None:
    """Set Qt Quick's software renderer in `environ` (before Qt is started) when OpenGL could only
    be software; returns the renderer set, or None when Qt's default stays. A `QT_QUICK_BACKEND`
    already set is the user's choice and is kept; off Linux, Qt's default stays."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux") or env.get("QT_QUICK_BACKEND"):
        return None
    if env.get("LIBGL_ALWAYS_SOFTWARE", "0") in ("", "0") and has_gpu(dev):
        return None
    env["QT_QUICK_BACKEND"] = "software"
    return "software"
