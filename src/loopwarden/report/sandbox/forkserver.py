"""The host side of the figure zygote (zygote.py): one zygote per host process, started at the
first figure and shared by every report that process runs (a CLI report, the server's reports,
a test worker), so the plotting stack is imported once per process instead of once per figure.

Per process rather than per report: data folders differ between reports, but nothing of a report
lives in the zygote (each child gets its figure's paths, limits and Landlock rules from its own
config, after the fork), and a server running many reports pays the import once. The zygote ends
with its host: it exits on EOF of its control socket, which only this process holds (the socket
is close-on-exec and every forked child closes its copy), so the host closing, being cancelled or
killed all end it, and it kills any figure child still running as it goes; `stop` (at exit) also
waits for it.

A figure run through the zygote is supervised as a spawned one (process.run_child): its stdout
and stderr are pipes the host made and reads as they come under the same cap, the status channel
is a pipe whose write end only the child holds, its process group is killed at the wall-clock
limit or a breach, and its exit status comes from the zygote, which reaps it. If the zygote cannot
start, stops answering or dies, `get` / `run_forked` say so (None, or a result marked
`unreported`) and the runner spawns the figure as before; LOOPWARDEN_FIGURE_ZYGOTE=0 switches the
zygote off."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from . import fontcache
from . import zygote as zygote_module
from .process import ChildResult, ChildSpec, Limits, _drain_fd, _signal_group, group_gone

SWITCH = "LOOPWARDEN_FIGURE_ZYGOTE"
START_WITHIN = 120.0
REPLY_WITHIN = 30.0
"""How long the zygote may take to fork and the child to report its pid."""
EXIT_GRACE_S = 10.0
"""After its group was killed, how long a child's exit status may take to come."""
MAX_STARTS = 3
"""Zygotes a process starts at most (one, then a replacement or two if one dies); none more
after one failed to start."""

log = logging.getLogger(__name__)


def enabled() -> bool:
    return os.environ.get(SWITCH, "1") != "0"


class Zygote:
    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket) -> None:
        self.process, self.control = process, control
        self.broken = False
        self._send = threading.Lock()

    def usable(self) -> bool:
        return not self.broken and self.process.poll() is None

    def request(self, fds: list[int]) -> bool:
        """Ask for one child; False when the zygote cannot take it."""
        try:
            with self._send:
                socket.send_fds(self.control, [b"fork"], fds)
        except OSError:
            self.broken = True
            return False
        return True

    def stop(self) -> None:
        self.broken = True
        self.control.close()  # EOF: the zygote kills its children and exits
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_lock = threading.Lock()
_current: list[Zygote] = []
_starts = [0]


def get(env: Mapping[str, str], readable: list[str]) -> Zygote | None:
    """This process's zygote, started (blocking, about a second) when there is none usable;
    None when it cannot start. `env`: a figure child's environment; `readable`: what it reads."""
    with _lock:
        if _current and _current[0].usable():
            return _current[0]
        if _current:
            _current.pop().stop()
        if _starts[0] >= MAX_STARTS:
            return None
        _starts[0] += 1
        started = _start(env, readable)
        if started is None:
            _starts[0] = MAX_STARTS  # what kept it from starting would again: spawn from now on
        else:
            _current.append(started)
        return started


def stop() -> None:
    with _lock:
        while _current:
            _current.pop().stop()


def _forget() -> None:
    """In a process forked from the host: the zygote is the host's; drop this copy of its socket
    so the zygote still sees EOF when the host ends."""
    for zygote in _current:
        zygote.broken = True
        with contextlib.suppress(OSError):
            zygote.control.close()
    _current.clear()


atexit.register(stop)
os.register_at_fork(after_in_child=_forget)


def _start(env: Mapping[str, str], readable: list[str]) -> Zygote | None:
    # Its own MPLCONFIGDIR, seeded with the font list as a figure's is: matplotlib reads it at
    # import, so it can go once the zygote is ready (a child cannot write there: Landlock).
    mpl = tempfile.mkdtemp(prefix="loopwarden-zygote-")
    try:
        fontcache.seed(Path(mpl), readable)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-I", str(zygote_module.__file__), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                env={**env, "MPLCONFIGDIR": mpl},
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ours.settimeout(START_WITHIN)
        try:
            message = ours.recv(1024)
        except OSError as error:
            message = f"no answer: {error}".encode()
        if message == b"ready":
            ours.settimeout(REPLY_WITHIN)  # sending a request never waits long
            return Zygote(process, ours)
        ours.close()
        if not message:  # EOF: it is ending by itself; its status says more than a kill's
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=EXIT_GRACE_S)
        process.kill()
        status = process.wait()
        # EOF: the zygote ended before it was ready; its status is all there is to say (its stderr
        # is closed, as a figure child's output must not reach the host's terminal).
        reason = message.decode(errors="replace") or f"it exited with status {status} before it was ready"
        log.warning("the figure zygote did not start (%s); figures spawn their own process", reason)
        return None
    finally:
        shutil.rmtree(mpl, ignore_errors=True)


async def run_forked(zygote: Zygote, spec: ChildSpec, payload: bytes) -> ChildResult | None:
    """Run one figure child forked by `zygote`; None when the zygote did not start it (nothing
    ran: the caller spawns it). `spec.argv`, `env` and `cwd` are the child's config's business."""
    stdin, out, err, status = os.pipe(), os.pipe(), os.pipe(), os.pipe()
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sent = zygote.request([theirs.fileno(), stdin[0], out[1], err[1], status[1]])
    finally:
        theirs.close()
        for fd in (stdin[0], out[1], err[1], status[1]):
            os.close(fd)
    mine.setblocking(False)
    pid = await _started(mine) if sent else None
    if pid is None:
        zygote.broken = True
        for fd in (stdin[1], out[0], err[0], status[0]):
            os.close(fd)
        mine.close()
        return None
    return await _supervise(spec, payload, pid, mine, (stdin[1], out[0], err[0], status[0]))


async def _started(reply: socket.socket) -> int | None:
    try:
        async with asyncio.timeout(REPLY_WITHIN):
            message = await asyncio.get_running_loop().sock_recv(reply, 64)
    except (TimeoutError, OSError):
        return None
    word, _, value = message.decode(errors="replace").partition(" ")
    return int(value) if word == "pid" and value.isdigit() else None


async def _exit_status(reply: socket.socket) -> int | None:
    """The wait status the zygote sends once it reaped the child; None at EOF (zygote gone)."""
    loop = asyncio.get_running_loop()
    while message := await loop.sock_recv(reply, 64):
        word, _, value = message.decode(errors="replace").partition(" ")
        if word == "exit" and value.lstrip("-").isdigit():
            return int(value)
    return None


def _write_all(fd: int, payload: bytes) -> None:
    try:
        with contextlib.suppress(BrokenPipeError):
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


async def _supervise(
    spec: ChildSpec, payload: bytes, pid: int, reply: socket.socket, fds: tuple[int, int, int, int]
) -> ChildResult:
    result = ChildResult()

    limits = Limits(result, pid, spec)
    limits.read(_drain_fd(fds[1], result.stdout, spec.output_cap, limits.on("output"), limits.output))
    limits.read(_drain_fd(fds[2], result.stderr, spec.output_cap, limits.on("output"), limits.output))
    limits.read(_drain_fd(fds[3], result.status, spec.status_cap, limits.on("status")))
    # A thread writes the config: a child that never reads it gets EPIPE when its group dies.
    limits.also(asyncio.to_thread(_write_all, fds[0], payload))
    status: int | None = None
    try:
        async with asyncio.timeout(spec.wall_seconds):
            status = await _exit_status(reply)
    except TimeoutError:
        result.timed_out = True
    finally:
        _signal_group(pid)
        if status is None and not result.timed_out:
            result.unreported = True
        if status is None:
            with contextlib.suppress(TimeoutError, OSError):
                async with asyncio.timeout(EXIT_GRACE_S):
                    status = await _exit_status(reply)
        reply.close()
        result.pgid_gone = await group_gone(pid)
        await limits.finish()
    result.returncode = os.waitstatus_to_exitcode(status) if status is not None else None
    return result
