"""The figure zygote: `python -I zygote.py FD`, a trusted process that imports the plotting stack
once and forks one child per figure, so a figure no longer pays a second of CPU for the imports.

It never runs model-written code and never reads anything a child wrote: it imports the stack
(child.py's `_import_stack`, in the same empty environment a figure child gets), then serves
requests on its control socket (FD, a SOCK_SEQPACKET socket of the host). A request is the word
"fork" and five file descriptors: a reply socket, the child's stdin (the config, read by the
child), stdout, stderr and status pipes, all made by the host, which keeps the other ends. The
zygote forks; the child makes its own session (so the host's kill of its process group works as
for a spawned child), asks to die with the zygote, tells the host its pid on the reply socket,
moves the pipes to fds 0-3, closes every other fd (the control socket, other figures' sockets and
pidfds) and runs child.py's `main` with the imported stack: from there on exactly what a spawned
child does (rlimits, Landlock with this figure's paths, seccomp, the model's code). The zygote
watches each child through a pidfd, reaps it and sends its wait status on its reply socket: the
one message the host believes there, as the child has closed its copy before any model code.

The zygote exits when the control socket reaches EOF (its host ended, however: closed, cancelled
or killed), killing the process groups of children still running. It refuses to fork unless it
is single-threaded (numpy's BLAS runs one thread: OPENBLAS_NUM_THREADS=1 in its environment)."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import select
import signal
import socket
import sys
import threading
from types import ModuleType
from typing import Any

PR_SET_PDEATHSIG = 1
FDS = 5  # reply socket, stdin, stdout, stderr, status


def _child_module() -> ModuleType:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
    spec = importlib.util.spec_from_file_location("_lw_child", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_lw_child"] = module
    spec.loader.exec_module(module)
    return module


def threads() -> int:
    """Threads of this process, native ones included (a BLAS pool would show here)."""
    return len(os.listdir("/proc/self/task"))


def _forked(fds: list[int], zygote: int, child: ModuleType, stack: dict[str, Any]) -> None:
    """In the new child: never returns."""
    code = 70
    try:
        os.setsid()
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != zygote:  # the zygote died before the request above
            os._exit(code)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a spawned Python
        reply = socket.socket(fileno=fds[0])
        reply.send(f"pid {os.getpid()}".encode())
        reply.close()  # from here on only the zygote can write on it: the exit status it sends
        for target, fd in enumerate(fds[1:]):
            # Received fds are above 2 (the zygote's own stdio) and fd 3 is written last, so no
            # source is overwritten before it is copied.
            os.dup2(fd, target)
        os.closerange(4, os.sysconf("SC_OPEN_MAX"))
        code = child.main(stack)
    finally:
        os._exit(code)


def serve(control: socket.socket, child: ModuleType, stack: dict[str, Any]) -> None:
    running: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, reply socket)
    try:
        while True:
            ready, _, _ = select.select([control.fileno(), *running], [], [])
            for fd in ready:
                if fd != control.fileno():
                    pid, reply = running.pop(fd)
                    _, status = os.waitpid(pid, 0)
                    os.close(fd)
                    with contextlib.suppress(OSError):  # the host gave up on this figure
                        reply.send(f"exit {status}".encode())
                    reply.close()
                    continue
                message, fds, flags, _ = socket.recv_fds(control, 64, FDS)
                if not message:
                    return  # the host is gone
                if message != b"fork" or len(fds) != FDS or flags & socket.MSG_CTRUNC:
                    for received in fds:
                        os.close(received)
                    continue
                reply = socket.socket(fileno=fds[0])
                try:
                    if threads() != 1 or threading.active_count() != 1:
                        raise RuntimeError("the zygote is not single-threaded")
                    zygote = os.getpid()
                    pid = os.fork()
                    if pid == 0:
                        _forked(fds, zygote, child, stack)
                except (OSError, RuntimeError) as error:  # no child: the host spawns this figure
                    with contextlib.suppress(OSError):
                        reply.send(f"error {error}".encode())
                    reply.close()
                    continue
                finally:
                    for received in fds[1:]:
                        os.close(received)
                running[os.pidfd_open(pid)] = (pid, reply)
    finally:
        for pid, _ in running.values():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # before its setsid, it is in the zygote's group
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the host ends the zygote (EOF), not the terminal
    control = socket.socket(fileno=int(argv[1]))
    try:
        os.close(os.pidfd_open(os.getpid()))  # Linux 5.3 or later: how children are watched
        child = _child_module()
        stack = child._import_stack()
    except Exception as error:
        control.send(f"error {type(error).__name__}: {error}".encode()[:1000])
        return 1
    if threads() != 1:
        control.send(f"error {threads()} threads after importing the plotting stack".encode())
        return 1
    control.send(b"ready")
    serve(control, child, stack)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
