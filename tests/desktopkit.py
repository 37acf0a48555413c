"""Driving `loopwarden app` as a person would, under a real X server (Xvfb, started here on a display
it picks itself with -displayfd): the window's page is read and clicked through Chromium's DevTools
protocol (Qt WebEngine's remote debugging, on for the test only), the native folder dialog is typed
into with xdotool, the window is closed with the WM_DELETE_WINDOW message a window manager sends for
its close button, and screenshots are taken of the whole screen. Every wait polls an explicit
condition with a generous limit: nothing sleeps for a fixed time and hopes."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx

from helpers import end_process

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
LOOPWARDEN = ROOT / ".venv" / "bin" / "loopwarden"
STARTUP_S = 240.0  # Qt WebEngine's first start on a loaded 2-core machine

# Polled every 0.5 s while the window starts: one client, as `httpx.get` built an SSL context per
# call (67 ms of CPU); no connection kept, as each app started has its own DevTools port.
DEVTOOLS = httpx.Client(timeout=5, limits=httpx.Limits(max_keepalive_connections=0))


def wait_for(what: str, check: Callable[[], T | None], timeout: float, every: float = 0.2) -> T:
    """Poll `check` until it returns something true (not None, False, "" or empty); fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def start_xvfb(*options: str) -> tuple[subprocess.Popen[bytes], str]:
    """Xvfb on a free display of its own choosing (-displayfd: it writes the number once it is
    ready to accept clients, so nothing races its start-up), with more of its `options`."""
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x900x24", "-nolisten", "tcp", *options],
        pass_fds=[write_end],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(write_end)
    number = b""
    deadline = time.monotonic() + 60
    try:
        while not number.endswith(b"\n"):
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(read_end, 16) if ready else b""
            if not chunk:
                process.kill()
                raise AssertionError("Xvfb did not report a display")
            number += chunk
    finally:
        os.close(read_end)
    return process, f":{int(number)}"


def xvfb_display(*options: str) -> Iterator[str]:
    """A module fixture's body: a display of an Xvfb of its own for the module's tests, ended after
    them. Without Xvfb and xdotool the tests skip, or fail under CI, which installs them
    (.ci/apt/app.txt)."""
    import pytest

    if not xvfb_available():
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)("needs Xvfb and xdotool (.ci/apt/app.txt)")
    process, name = start_xvfb(*options)
    yield name
    stop_xvfb(process)


def stop_xvfb(process: subprocess.Popen[bytes]) -> None:
    """End an Xvfb and reap it, so no server of a finished module is still running (or a zombie)
    when the worker's next one starts."""
    end_process(process, timeout=60)


def debug_port() -> int:
    """A port for the window's DevTools (Qt refuses port 0): one below the kernel's ephemeral range,
    free when checked. The test then checks the DevTools page is this app's page."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port for DevTools")


class XWindows:
    """Just enough of Xlib (ctypes) to ask a window to close the way a window manager does."""

    def __init__(self, display: str) -> None:
        self.lib = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
        self.lib.XOpenDisplay.restype = ctypes.c_void_p
        self.lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
        self.lib.XInternAtom.restype = ctypes.c_ulong
        self.lib.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self.lib.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
        self.lib.XFlush.argtypes = [ctypes.c_void_p]
        self.lib.XCloseDisplay.argtypes = [ctypes.c_void_p]
        self.display = display

    def focus_root(self) -> int:
        """Give the keyboard focus to the root window (as clicking the desktop would); its id."""
        self.lib.XDefaultRootWindow.restype = ctypes.c_ulong
        self.lib.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        self.lib.XSetInputFocus.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_ulong]
        dpy = self.lib.XOpenDisplay(self.display.encode())
        assert dpy, f"cannot open {self.display}"
        try:
            root = int(self.lib.XDefaultRootWindow(dpy))
            self.lib.XSetInputFocus(dpy, root, 1, 0)  # RevertToPointerRoot, CurrentTime
            self.lib.XFlush(dpy)
            return root
        finally:
            self.lib.XCloseDisplay(dpy)

    def keys_down(self) -> list[int]:
        """The keycodes the X server holds down now (XQueryKeymap)."""
        self.lib.XQueryKeymap.argtypes = [ctypes.c_void_p, ctypes.c_char * 32]
        dpy = self.lib.XOpenDisplay(self.display.encode())
        assert dpy, f"cannot open {self.display}"
        try:
            keymap = (ctypes.c_char * 32)()
            self.lib.XQueryKeymap(dpy, keymap)
        finally:
            self.lib.XCloseDisplay(dpy)
        bits = bytes(keymap)
        return [8 * i + bit for i, byte in enumerate(bits) for bit in range(8) if byte >> bit & 1]

    def close_window(self, window: int) -> None:
        class ClientMessage(ctypes.Structure):
            _fields_ = [
                ("type", ctypes.c_int),
                ("serial", ctypes.c_ulong),
                ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p),
                ("window", ctypes.c_ulong),
                ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int),
                ("data", ctypes.c_long * 5),
                ("pad", ctypes.c_long * 24),  # XEvent is a union of 24 longs; stay larger than it
            ]

        dpy = self.lib.XOpenDisplay(self.display.encode())
        assert dpy, f"cannot open {self.display}"
        try:
            event = ClientMessage()
            event.type = 33  # ClientMessage
            event.window = window
            event.message_type = self.lib.XInternAtom(dpy, b"WM_PROTOCOLS", 0)
            event.format = 32
            event.data[0] = self.lib.XInternAtom(dpy, b"WM_DELETE_WINDOW", 0)
            event.data[1] = 0  # CurrentTime
            assert self.lib.XSendEvent(dpy, window, 0, 0, ctypes.byref(event))
            self.lib.XFlush(dpy)
        finally:
            self.lib.XCloseDisplay(dpy)


def xdotool(display: str, *args: str, timeout: float = 60) -> str:
    result = subprocess.run(
        ["xdotool", *args], env={**os.environ, "DISPLAY": display}, capture_output=True, text=True, timeout=timeout
    )
    return result.stdout.strip() if result.returncode == 0 else ""


def screenshot(display: str, path: Path) -> Path:
    from PIL import ImageGrab

    path.parent.mkdir(parents=True, exist_ok=True)
    image = ImageGrab.grab(xdisplay=display)
    image.save(path)
    return path


def app_env(tmp: Path, display: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a person with no model configured (offline), a home of their own, and an
    `xdg-open` that writes down what it was asked to open (the system viewer, as the test sees it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPWARDEN_", "QTWEBENGINE_"))}
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    bin_dir, home = tmp / "bin", tmp / "home"
    bin_dir.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    opener = bin_dir / "xdg-open"
    opener.write_text(f'#!/bin/sh\nprintf "%s\\n" "${{1#file://}}" >> {tmp / "opened.txt"}\n', encoding="utf-8")
    opener.chmod(0o755)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config")
    )
    env["XDG_RUNTIME_DIR"] = str(tmp / "runtime")
    (tmp / "runtime").mkdir(mode=0o700, exist_ok=True)
    if display is not None:
        env["DISPLAY"] = display
    env.update(extra or {})
    return env


class App:
    """One `loopwarden app` process and the page in its window."""

    def __init__(self, tmp: Path, display: str, state: Path, name: str = "app") -> None:
        self.tmp, self.display, self.state = tmp, display, state
        self.port = debug_port()
        self.log = tmp / f"{name}.stderr"
        env = app_env(tmp, display, {"QTWEBENGINE_REMOTE_DEBUGGING": f"127.0.0.1:{self.port}"})
        with self.log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [str(LOOPWARDEN), "app", "--state-dir", str(state)],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,  # the app's whole process tree is one session: counted at the end
            )
        self.url = wait_for("the app's server", self._served_url, STARTUP_S)
        self._socket: Any = None
        self._id = 0
        wait_for("the window's page in DevTools", self._connect, STARTUP_S, every=0.5)
        wait_for("the page's desktop controls", lambda: self.js("document.body?.dataset.desktop") == "ready", STARTUP_S)

    # -- the process ----------------------------------------------------------------------------

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def _served_url(self) -> str | None:
        if self.process.poll() is not None:
            raise AssertionError(f"the app exited ({self.process.returncode}):\n{self.stderr()}")
        for line in self.stderr().splitlines():
            if line.startswith("loopwarden: app serving on "):
                return line.split()[4]
        return None

    def session_processes(self) -> list[str]:
        """Processes still in the app's session (the app, Qt WebEngine's helpers, xdg-open...)."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            fields = text.rsplit(")", 1)[1].split()
            if fields and int(fields[3]) == self.process.pid and fields[0] != "Z":
                found.append(text.split(")", 1)[0] + ")")
        return found

    def window_id(self) -> int:
        found = wait_for(
            "the app's window",
            lambda: xdotool(
                self.display,
                "search",
                "--all",
                "--onlyvisible",
                "--pid",
                str(self.process.pid),
                "--name",
                "^loopwarden$",
            ),
            STARTUP_S,
        )
        return int(found.split()[0])

    def close_window(self, timeout: float = 180) -> int:
        """Close as the window manager's close button would; returns the exit code."""
        XWindows(self.display).close_window(self.window_id())
        try:
            return self.process.wait(timeout)
        finally:
            if self._socket is not None:
                self._socket.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    # -- the page ---------------------------------------------------------------------------------

    def _connect(self) -> bool:
        from websockets.sync.client import connect

        try:
            targets = DEVTOOLS.get(f"http://127.0.0.1:{self.port}/json").json()
        except (httpx.HTTPError, ValueError):
            return False
        pages = [t for t in targets if t.get("type") == "page" and t.get("url", "").startswith(self.url)]
        if not pages:
            return False
        self._socket = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        return True

    def js(self, expression: str) -> Any:
        """Evaluate in the window's page (promises awaited); the value, as JSON."""
        self._id += 1
        message = {
            "id": self._id,
            "method": "Runtime.evaluate",
            "params": {"expression": expression, "returnByValue": True, "awaitPromise": True},
        }
        self._socket.send(json.dumps(message))
        while True:
            reply = json.loads(self._socket.recv(timeout=120))
            if reply.get("id") == self._id:
                break
        result = reply.get("result", {})
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def click(self, element_id: str) -> None:
        assert self.js(f"(() => {{ const b = document.getElementById({element_id!r}); b.click(); return true; }})()")

    def wait_js(self, what: str, expression: str, timeout: float = STARTUP_S) -> Any:
        return wait_for(what, lambda: self.js(expression), timeout, every=0.3)

    # -- the native folder dialog --------------------------------------------------------------

    def pick_folder(self, folder: Path, title: str = "Choose the data folder") -> None:
        """Click "Choose folder…", type the folder's path into the dialog that opens, press Enter.

        The keys go through XTEST to the focused window, as a keyboard's do, never `--window`:
        with `--window` xdotool picks XTEST or XSendEvent per key event, by whether the window
        has the focus at that moment. Enter's press went by XTEST, the dialog closed on it, and
        the release went by XSendEvent to a window that was gone: the X server kept Enter held
        down and repeated it into the app, and the next dialog of the window took the repeat
        and closed at once on the folder it opened in."""
        self.click("pick-folder")
        dialog = int(
            wait_for(
                "the folder dialog", lambda: xdotool(self.display, "search", "--onlyvisible", "--name", title), 120
            )
        )
        xdotool(self.display, "windowfocus", "--sync", str(dialog))
        xdotool(self.display, "type", "--delay", "30", str(folder))
        shown = f"document.getElementById('picked-folder').textContent === {str(folder)!r}"
        pressed = [-float("inf")]  # when Enter was last pressed

        def chosen() -> bool:
            if self.js(shown):
                return True
            # Pressed again while the dialog is still open 2 s later (an Enter that did not
            # take), never sooner: a dialog still closing must not get a second Enter.
            if time.monotonic() - pressed[0] >= 2.0 and xdotool(self.display, "search", "--name", title):
                xdotool(self.display, "windowfocus", "--sync", str(dialog), "key", "Return")
                pressed[0] = time.monotonic()
            return False

        wait_for("the picked folder on the page", chosen, 120, every=0.3)
        wait_for("no key held down on the X server", lambda: not XWindows(self.display).keys_down(), 60)


def copy_example(tmp: Path, name: str = "data", *, screenshot: bool = True) -> Path:
    """examples/field-scan copied to `tmp / name`. Without its screenshot for the runs that stop at
    their first figure (drawn from the CSV files): reading it (offline OCR, the engine loaded anew in
    each app process) was about 2.3 s of CPU of each."""
    target = tmp / name
    shutil.copytree(
        ROOT / "examples" / "field-scan", target, ignore=None if screenshot else shutil.ignore_patterns("*.png")
    )
    return target


def xvfb_available() -> bool:
    return shutil.which("Xvfb") is not None and shutil.which("xdotool") is not None


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LOOPWARDEN), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def iter_lines(path: Path) -> Iterator[str]:
    if path.exists():
        yield from path.read_text(encoding="utf-8").splitlines()
