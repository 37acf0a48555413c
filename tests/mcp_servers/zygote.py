"""The toolbox server (toolbox.py) forked, not started: this process imports the MCP SDK and the
toolbox once, then forks a fresh server for each start tests/mcpkit.py asks for. A new Python
importing the SDK costs about 1.3 s of CPU, a fork a few milliseconds; the forked server is the
same program (`toolbox.main()` with the start's arguments), from the module's pristine state.

`python zygote.py SOCKET`: listens on the unix socket SOCKET and prints `ready`; once its stdin
closes, waits for its watchers and exits. A start (launch.py, the process an MCP client spawns)
connects and sends the server's arguments (JSON) with its own stdin, stdout and stderr. For each
start a watcher process forks the server onto those three descriptors, then waits for whichever
comes first: the server's exit (its status goes back to launch.py, which exits with it) or
launch.py going away (killed by the client: the server is killed too). The server holds the only
other copies of the client's pipes, so a server that exits or dies closes them, as a spawned one would.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time

import toolbox

LAST_WAIT_S = 10.0
"""How long the zygote waits for its watchers once the test process closes its stdin (their
servers are closed by then; a server left running is not waited for)."""


def main(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    watchers: set[int] = set()
    while True:
        readable, _, _ = select.select([listener, sys.stdin.fileno()], [], [], 1.0)
        watchers -= reaped(watchers)
        if sys.stdin.fileno() in readable and not os.read(sys.stdin.fileno(), 1):
            break  # the test process is done with us
        if listener in readable:
            connection, _ = listener.accept()
            pid = os.fork()
            if pid == 0:
                listener.close()
                try:
                    watch(connection)
                finally:
                    os._exit(0)
            connection.close()
            watchers.add(pid)
    deadline = time.monotonic() + LAST_WAIT_S
    while watchers and time.monotonic() < deadline:
        time.sleep(0.05)
        watchers -= reaped(watchers)


def reaped(watchers: set[int]) -> set[int]:
    """The watchers that have exited, waited for (not left to the kernel: a process's CPU counts
    towards its parent's, and so the test process's, only when its parent waits for it)."""
    return {pid for pid in watchers if os.waitpid(pid, os.WNOHANG)[0] == pid}


def watch(connection: socket.socket) -> None:
    """Fork the server onto the start's descriptors; report its exit, or kill it once the start is gone."""
    message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    args = json.loads(message)
    pid = os.fork()
    if pid == 0:
        connection.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        serve(args)
    for fd in fds:
        os.close(fd)
    server = os.pidfd_open(pid)
    readable, _, _ = select.select([connection, server], [], [])
    if connection in readable:  # launch.py sends nothing: readable means it is gone
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):  # launch.py is gone
        connection.sendall(str(os.waitstatus_to_exitcode(status)).encode())


def serve(args: list[str]) -> None:
    """The server's process: toolbox.py's main with `args`, exiting as its Python would."""
    sys.argv = [toolbox.__file__, *args]
    code = 0
    try:
        toolbox.main()
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1])
