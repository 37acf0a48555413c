"""Is there a display to open a window on? Answered before Qt is imported: Qt's own answer to a
missing display is an abort with a core dump and several lines about platform plugins."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping

SERVE_HINT = "run `loopwarden serve` and open its page in a browser instead"


def display_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """None when a window can be opened, else one line saying why not (and what to do)."""
    env = os.environ if environ is None else environ
    if sys.platform in ("darwin", "win32"):
        return None  # the platform's own window system is always there for a logged-in user
    wayland = env.get("WAYLAND_DISPLAY", "")
    if wayland and _wayland_reachable(wayland, env.get("XDG_RUNTIME_DIR", "")):
        return None
    display = env.get("DISPLAY", "")
    if not display:
        return f"no display to open a window on (DISPLAY is not set); {SERVE_HINT}"
    if not _x_reachable(display):
        return f"cannot reach the display {display!r}; {SERVE_HINT}"
    return None


def _wayland_reachable(name: str, runtime_dir: str) -> bool:
    path = name if name.startswith("/") else os.path.join(runtime_dir, name)
    return _connects(socket.AF_UNIX, path)


def _x_reachable(display: str) -> bool:
    """Connect to the X server's socket (no protocol spoken): `:N`, `unix:N`, `host:N`, `/path:N`."""
    host, _, rest = display.rpartition(":")
    number = rest.split(".", 1)[0]
    if not number.isdigit():
        return False
    if host in ("", "unix"):
        if _connects(socket.AF_UNIX, f"/tmp/.X11-unix/X{number}"):
            return True
        return _connects(socket.AF_UNIX, f"\0/tmp/.X11-unix/X{number}")  # Linux abstract socket
    try:
        with socket.create_connection((host, 6000 + int(number)), timeout=2):
            return True
    except OSError:
        return False


def _connects(family: int, address: str) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        try:
            sock.connect(address)
        except OSError:
            return False
    return True
