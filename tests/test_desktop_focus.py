"""`desktop.focus.take_focus` against a real X server (Xvfb) and a real client window (xmessage):
why Qt's own request can fail (a focus request stamped earlier than the last focus change is
dropped by the server) and that one stamped with the server's time is not."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from desktopkit import XWindows, start_xvfb, wait_for, xdotool, xvfb_available
from loopwarden.desktop.focus import take_focus


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    if not xvfb_available() or shutil.which("xmessage") is None:  # CI installs them (.ci/apt/app.txt)
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("needs Xvfb, xdotool and xmessage")
    process, name = start_xvfb()
    yield name
    process.terminate()
    process.wait(timeout=60)


@pytest.fixture
def window(display: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setenv("DISPLAY", display)
    client = subprocess.Popen(
        ["xmessage", "-display", display, "-name", "lwfocus", "focus test"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        found = wait_for(
            "xmessage's window", lambda: xdotool(display, "search", "--onlyvisible", "--classname", "lwfocus"), 60
        )
        yield int(found.split()[0])
    finally:
        client.kill()
        client.wait(timeout=60)


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
