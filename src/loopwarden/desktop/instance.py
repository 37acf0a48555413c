"""One app per run store. The first launch holds the run store's lock (the same lock `loopwarden
serve` takes, so an app and a server never share a store) and answers on a local socket named
after the store; a second launch finds the lock taken, asks the first to bring its window to the
front, and exits. All of it is plain sockets, settled before Qt is imported, so a second launch
answers in a fraction of a second however slow the first one's start is."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ..server.cli import lock_state_dir

RAISE = b"raise\n"
_TIMEOUT_S = 30.0


def socket_name(state_dir: Path) -> str:
    """An abstract socket name (Linux: no file to go stale after a crash), one per run store and user."""
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:24]
    return f"\0loopwarden-app-{os.getuid()}-{digest}"


class Instance:
    """The first launch on a run store: holds its lock and answers `raise` requests."""

    def __init__(self, state_dir: Path, lock: IO[bytes], listener: socket.socket) -> None:
        self.state_dir = state_dir
        self._lock = lock
        self._listener = listener
        self._on_raise: Callable[[], None] | None = None
        self._missed = 0
        self._url = ""
        self._mutex = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="loopwarden-app-instance", daemon=True)
        self._thread.start()

    def on_raise(self, callback: Callable[[], None], url: str) -> None:
        """Called (on the socket thread) for each request; requests that came before are replayed."""
        with self._mutex:
            self._on_raise, self._url, missed, self._missed = callback, url, self._missed, 0
        for _ in range(missed):
            callback()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._lock.close()  # releases the run store's lock

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            with connection:
                connection.settimeout(_TIMEOUT_S)
                try:
                    if not _same_user(connection) or connection.recv(64) != RAISE:
                        continue
                    with self._mutex:
                        callback, url = self._on_raise, self._url
                        if callback is None:
                            self._missed += 1
                    if callback is not None:
                        callback()
                    connection.sendall(f"raised {url}\n".encode())
                except OSError:
                    continue


def claim(state_dir: Path) -> Instance | None:
    """Become the run store's app, or None when something else holds it (an app or a server)."""
    lock = lock_state_dir(state_dir)
    if lock is None:
        return None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(socket_name(state_dir))
    except OSError:
        # The name is taken although the lock was free: a previous app on this store is still
        # shutting down its socket. Go on without answering second launches.
        listener.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("")  # autobind: a private abstract name nobody asks
    listener.listen(8)
    return Instance(state_dir, lock, listener)


def ask_to_raise(state_dir: Path, timeout_s: float = _TIMEOUT_S) -> str | None:
    """Ask the app holding this run store to bring its window to the front. Its page's address when
    it answered; None when no app answers (the store is held by `loopwarden serve`)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(socket_name(state_dir))
            sock.sendall(RAISE)
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = sock.recv(256)
                if not chunk:
                    break
                reply += chunk
        except OSError:
            return None
    text = reply.decode(errors="replace").strip()
    return text.removeprefix("raised").strip() if text.startswith("raised") else None


def _same_user(connection: socket.socket) -> bool:
    """Abstract sockets have no file permissions: only the same user may ask."""
    creds = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())
