"""The keyboard focus for the window another launch asked for, on X11.

On an X server without a window manager Qt activates a window by a SetInputFocus request stamped
with the time of the last X event Qt saw. The server drops a focus request older than the last
focus change, so when something took the focus since (the user clicked the desktop) and no newer
event has reached Qt, the request is dropped and the window stays behind. It showed as a rare
failure of the second-launch test on a loaded machine. A launch asking for the window is the
user's own act, so the focus is also set stamped with the server's own time (CurrentTime), on a
connection of its own through libxcb: its errors come back as values, where Xlib's default
handler would end the process (a window not yet viewable is an error).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

CURRENT_TIME = 0
_REVERT_TO_PARENT = 2


class _Cookie(ctypes.Structure):
    _fields_ = [("sequence", ctypes.c_uint)]


def take_focus(window_id: int, time: int = CURRENT_TIME) -> bool:
    """Ask the X server to give `window_id` the keyboard focus, stamped `time`; whether it took
    the request without an error. False where there is no X display or no libxcb (Wayland,
    macOS, Windows) and for a window that is gone or not viewable."""
    name = ctypes.util.find_library("xcb")
    if not os.environ.get("DISPLAY") or name is None:
        return False
    try:
        xcb = ctypes.CDLL(name)
    except OSError:
        return False
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_set_input_focus_checked.restype = _Cookie
    xcb.xcb_set_input_focus_checked.argtypes = [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint32]
    xcb.xcb_request_check.restype = ctypes.c_void_p
    xcb.xcb_request_check.argtypes = [ctypes.c_void_p, _Cookie]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(None, None)  # never NULL: a failed connection reports an error
    try:
        if xcb.xcb_connection_has_error(connection):
            return False
        cookie = xcb.xcb_set_input_focus_checked(connection, _REVERT_TO_PARENT, window_id & 0xFFFFFFFF, time)
        error = xcb.xcb_request_check(connection, cookie)  # a round trip: the server has handled it
        if error:
            _free(error)
            return False
        return True
    finally:
        xcb.xcb_disconnect(connection)


def _free(pointer: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(pointer)
