"""`desktop.focus.take_focus` against a real X server (Xvfb) and a real window:
why Qt's own request can fail (a focus request stamped earlier than the last focus change is
dropped by the server) and that one stamped with the server's time is not."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator

import pytest

from desktopkit import XWindows, wait_for, xdotool, xvfb_display
from loopwarden.desktop.focus import take_focus


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    """-noreset: an X server resets when its last client leaves and drops a client that connects
    meanwhile; each test's window is that last client, so the next test's connection failed now and
    then ("cannot open :0", 8-12 of 300 open/close pairs under load, 0 of 300 with -noreset). The
    app's tests keep the reset: with -noreset two of them timed out waiting for the folder dialog
    (twice in a row; not looked into further)."""
    yield from xvfb_display("-noreset")


@pytest.fixture
def window(display: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A plain mapped top-level window, made through Xlib on a connection the test holds (the
    window lives as long as it): no client program to start and search for."""
    monkeypatch.setenv("DISPLAY", display)
    x = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
    x.XOpenDisplay.restype = ctypes.c_void_p
    x.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x.XDefaultRootWindow.restype = ctypes.c_ulong
    x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
    x.XCreateSimpleWindow.restype = ctypes.c_ulong
    x.XCreateSimpleWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong] + [ctypes.c_int] * 2 + [ctypes.c_uint] * 3
    x.XCreateSimpleWindow.argtypes += [ctypes.c_ulong] * 2
    x.XMapWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
    x.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
    x.XCloseDisplay.argtypes = [ctypes.c_void_p]
    connection = x.XOpenDisplay(display.encode())
    assert connection, f"cannot open {display}"
    try:
        made = int(x.XCreateSimpleWindow(connection, x.XDefaultRootWindow(connection), 10, 10, 200, 100, 0, 0, 0))
        x.XMapWindow(connection, made)
        x.XSync(connection, 0)  # no window manager: mapped (and viewable) once the server has it
        yield made
    finally:
        x.XCloseDisplay(connection)


def _focus(display: str) -> str:
    return xdotool(display, "getwindowfocus")


def test_a_stale_request_is_dropped_and_one_stamped_now_takes_the_focus(display: str, window: int) -> None:
    root = XWindows(display).focus_root()  # the user clicks the desktop, stamped with the server's time
    wait_for("the focus on the desktop", lambda: _focus(display) == str(root), 60)

    assert take_focus(window, time=1)  # what Qt sends when the last event it saw is older
    assert _focus(display) == str(root)  # the server handled it (a round trip) and dropped it

    assert take_focus(window)
    assert _focus(display) == str(window)


def test_a_window_that_is_gone_or_no_display_is_a_false_not_a_crash(
    display: str, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not take_focus(0x7FFFFFF0)  # no such window: BadWindow comes back as a value
    assert take_focus(window)  # the connection is still usable afterwards (a fresh one each call)
    monkeypatch.delenv("DISPLAY")
    assert not take_focus(window)
    monkeypatch.setenv("DISPLAY", ":999")  # nothing listens there
    assert not take_focus(window)
