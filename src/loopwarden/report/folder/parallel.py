"""The scan's walk split between this process and one worker process, on two cores.

One process cannot list 100k files as fast as `find` does: the bare scandir + lstat loop in
Python already costs more than `find`, and the kernel's share of it alone is about all of
`find`'s time (bench/README.md, "Scan"). Two walkers, each on its own core, can.

The worker is a fresh `python -I -S` running `walk.py` alone (standard library only, nothing
from the package, so it starts in tens of milliseconds), not a fork: this process may have
threads (the HTTP server runs scans off its event loop), and forking a threaded process is
unsafe. It is started only once this process has listed `START_AFTER_FILES` files with at least
two folders still to walk, so a small folder never pays for it, and only if a core is free for it
(`free_cores`): on a busy machine it would only take CPU from the scanner.

Work is shared by stealing, in both directions: when the worker is idle it is handed the
bottom half of the folders on this process's stack (the last in path order, and the shallowest,
so the largest subtrees), which become holes in this process's listing; when this process runs
out of work it asks the worker for half of its own. Each side's listing of a subtree comes back
with the holes where the other side's subtrees go, and `assemble` fills them: the result is the
very listing the single-process walk makes (the same code walks each folder; tests compare the
two on awkward trees).

Whatever goes wrong with the worker (it cannot start, dies, is killed, sends something
unreadable), its unfinished folders are walked here and the result is the same; any other
surprise in this machinery falls back to a single-process walk from scratch.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys

from . import walk as walk_module
from .walk import Channel, Columns, Step, give, walk

__all__ = ["START_AFTER_FILES", "Listing", "SharedWalk", "assemble", "free_cores", "walk_tree", "worker_command"]

START_AFTER_FILES = 4000
"""Files listed by this process before the worker is started: about 20 ms of walking on the
benchmark's machine, the worker's own start-up time. Smaller trees stay in one process."""

Listing = tuple[list[str], list[int], list[str], list[tuple[str, str]]]
"""(paths, sizes, extensions, skipped) of a whole tree, in path order (skipped in walk order)."""

# The worker: this module's folder on the path, walk.py imported as a plain module (its cached
# bytecode is the package's), serving until its stdin closes.
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import walk; walk.serve(sys.argv[2])"
_F_SETPIPE_SZ = 1031  # Linux: a 1 MiB pipe, so a large result does not stall on a 64 KiB one


def walk_tree(real_root: str, parallel: bool) -> Listing:
    if parallel and _can_share():
        shared = SharedWalk(real_root)
        try:
            return shared.run()
        except Exception:
            pass  # never lose the scan to this machinery: walk it alone below
        finally:
            shared.close()
    out = Columns()
    walk(real_root, "", real_root, out)
    return out.paths, out.sizes, out.exts, out.skipped


def _can_share() -> bool:
    """Two cores for this process, and a Python to start (a frozen application's executable is
    not one that runs `-c` code)."""
    return _cores() >= 2 and bool(sys.executable) and not getattr(sys, "frozen", False)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_cores() -> int:
    """Cores this process may run on minus the tasks runnable right now besides the caller (the
    kernel's count in /proc/loadavg); all of them where that is not known.

    The worker pays only on a free core: with one other busy task on two cores, the scanner and
    the worker share what is left with it and the scan took 10-20% longer than alone."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return _cores()
    return _cores() - (running - 1)


def worker_command(real_root: str) -> list[str]:
    """How the worker is started (tests replace it to make the worker fail)."""
    return [sys.executable, "-I", "-S", "-c", _BOOT, os.path.dirname(walk_module.__file__), real_root]


class SharedWalk:
    def __init__(
        self, real_root: str, start_after: int | None = None, wait_ready: bool = False, when_busy: bool = False
    ) -> None:
        self.real_root = real_root
        self.start_after = START_AFTER_FILES if start_after is None else start_after
        # Tests: wait for the worker to start, so that it gets work; start it on a busy machine.
        self.wait_ready, self.when_busy = wait_ready, when_busy
        self.results: dict[str, Columns] = {}  # rel -> what was walked there, by either side
        self.mine: list[tuple[str, str]] = []  # (folder, rel) to walk here
        self.lent: dict[str, str] = {}  # rel -> folder of what the worker walks
        self.current = Columns()
        self.worker: subprocess.Popen[bytes] | None = None
        self.channel: Channel | None = None
        self.idle = False  # the worker waits for work
        self.asked = False  # a ("T",) is unanswered
        self.may_ask = True  # the worker has not said no since its last result
        self.started = False
        self.failure: BaseException | None = None  # why the worker was given up, if it was
        self.by_worker: list[str] = []  # rel of each subtree the worker walked (for tests)

    def run(self) -> Listing:
        self.mine.append((self.real_root, ""))
        while True:
            while self.mine:
                folder, rel = self.mine.pop()
                self.current = out = Columns()
                walk(folder, rel, self.real_root, out, self.tend)
                self.results[rel] = out
            if not self.wait_for_work():
                return assemble(self.results)

    def tend(self, stack: list[Step]) -> None:
        """Called after each folder this process lists: start the worker, take in its messages,
        give it work when it is idle."""
        if self.channel is None:
            if self.started or len(self.current.paths) < self.start_after or sum(s[2] is None for s in stack) < 2:
                return
            self.started = True
            if not self.when_busy and free_cores() < 2:  # no core for a worker: stay alone
                return
            self.start()
            if self.channel is None:
                return
        try:
            if self.channel.ready():
                self.channel.fill()
                self.take_messages()
            if self.idle and (lend := give(stack)):
                self.lend(lend)
        except Exception as error:  # the worker failed: see `give_up`
            self.give_up(error)

    def start(self) -> None:
        self.started = True
        try:
            self.worker = subprocess.Popen(
                worker_command(self.real_root), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
            assert self.worker.stdin is not None and self.worker.stdout is not None
            with contextlib.suppress(OSError):
                fcntl.fcntl(self.worker.stdout.fileno(), _F_SETPIPE_SZ, 1 << 20)
            self.channel = Channel(self.worker.stdout.fileno(), self.worker.stdin.fileno())
            while self.wait_ready and not self.idle:
                self.channel.fill()
                self.take_messages()
        except Exception as error:  # no worker: this process walks alone
            self.give_up(error)

    def lend(self, folders: list[tuple[str, str]]) -> None:
        assert self.channel is not None
        self.lent.update((rel, folder) for folder, rel in folders)
        self.idle = False
        self.channel.send(("W", folders))

    def take_messages(self) -> None:
        assert self.channel is not None
        while (message := self.channel.take()) is not None:
            if message[0] == "I":
                self.idle, self.may_ask = True, True
            elif message[0] == "R":
                rel, paths, sizes, exts, holes, skipped = message[1:]
                out = Columns()
                out.paths, out.sizes, out.exts, out.holes, out.skipped = paths, sizes, exts, holes, skipped  # type: ignore[assignment]
                del self.lent[rel]  # type: ignore[arg-type]
                self.results[rel] = out  # type: ignore[index]
                self.by_worker.append(rel)  # type: ignore[arg-type]
                self.may_ask = True
            elif message[0] == "G" and self.asked:
                self.asked = False
                for folder, rel in message[1]:  # type: ignore[attr-defined]
                    self.lent.pop(rel, None)  # a folder sent and not started comes back
                    self.mine.append((folder, rel))
                if not message[1]:
                    self.may_ask = False  # not again before the worker has moved on
            else:
                raise ValueError(f"unexpected message {message[0]!r}")

    def wait_for_work(self) -> bool:
        """This process has walked all it has: ask the worker for some and wait for an answer.
        False when the walk is over (nothing left on either side)."""
        while self.channel is not None and not self.mine:
            try:
                if not self.lent:  # the worker holds nothing of this walk (or is still starting)
                    self.close()
                    return False
                if not self.idle and not self.asked and self.may_ask:
                    self.asked = True
                    self.channel.send(("T",))
                self.channel.fill()
                self.take_messages()
            except Exception as error:  # the worker failed
                self.give_up(error)
        return bool(self.mine)

    def give_up(self, error: BaseException) -> None:
        """Stop the worker; what it had not sent back is walked here."""
        self.failure = error
        self.mine += ((folder, rel) for rel, folder in self.lent.items())
        self.lent.clear()
        self.close()

    def close(self) -> None:
        self.channel = None
        worker, self.worker = self.worker, None
        if worker is not None:
            if worker.stdin is not None:
                with contextlib.suppress(OSError):
                    worker.stdin.close()  # an idle worker leaves when its stdin closes
            if self.failure is not None or not self.idle:
                worker.kill()  # rather than wait for it to start, or to finish what is lost
            try:
                worker.wait(timeout=5)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            if worker.stdout is not None:
                worker.stdout.close()


def assemble(results: dict[str, Columns]) -> Listing:
    """The root's listing with every hole filled by the listing of its subtree, recursively;
    skipped entries of the subtrees used (a subtree the worker had half walked when it failed is
    walked again here whole, and its parts walked before are not used)."""
    paths: list[str] = []
    sizes: list[int] = []
    exts: list[str] = []
    skipped: list[tuple[str, str]] = []
    todo = [(results[""], 0, 0)]  # (listing, next index to copy, next hole)
    while todo:
        part, start, hole = todo.pop()
        if start == 0 and hole == 0:
            skipped += part.skipped
        if hole < len(part.holes):
            at, rel = part.holes[hole]
            todo.append((part, at, hole + 1))
            todo.append((results[rel], 0, 0))
        else:
            at = len(part.paths)
        paths += part.paths[start:at]
        sizes += part.sizes[start:at]
        exts += part.exts[start:at]
    return paths, sizes, exts, skipped
