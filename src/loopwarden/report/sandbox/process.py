"""Running a contained child and reading it with bounded memory: stdout and stderr are read as
they come (a head and a tail kept, the rest counted and dropped), the child's whole process group
is killed past the output cap, past a limit a watcher reports, or past the wall-clock limit, and
an optional status channel (a pipe only the parent reads, on an inherited fd) carries the
trusted bootstrap's report. Used by the figure sandbox and by the contained TeX run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

CHUNK = 64 * 1024
DRAIN_GRACE_S = 5.0
"""After the child is gone, how long a pipe may stay open (held by a process outside the group)."""


@dataclass
class Capture:
    """What was kept of one stream: its first and last `keep` bytes, and how much there was."""

    keep: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - self.keep)]

    def text(self) -> str:
        skipped = self.total - len(self.head) - len(self.tail)
        gap = f"\n[... {skipped} bytes not kept ...]\n".encode() if skipped > 0 else b""
        return bytes(self.head + gap + self.tail).decode("utf-8", errors="replace")


@dataclass
class ChildResult:
    returncode: int | None = None
    stdout: Capture = field(default_factory=lambda: Capture(64 * 1024))
    stderr: Capture = field(default_factory=lambda: Capture(64 * 1024))
    status: Capture = field(default_factory=lambda: Capture(64 * 1024))
    timed_out: bool = False
    limit: str | None = None
    """The first limit the child broke (output, status channel, or one a watcher reported)."""
    pgid_gone: bool = True
    unreported: bool = False
    """The child's exit status never came (its figure zygote died while it ran)."""


Watcher = Callable[[], str | None]
"""Called every `watch_interval` seconds while the child runs: a limit it broke, or None."""


@dataclass(frozen=True)
class ChildSpec:
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str
    wall_seconds: float
    stdin: bytes | None = None
    output_cap: int = 16 << 20
    """stdout + stderr bytes the child may write before its process group is killed."""
    status_channel: bool = False
    status_cap: int = 1 << 20
    watcher: Watcher | None = None
    watch_interval: float = 0.1


class Limits:
    """The tasks that read a running child and hold it to its spec's limits: at the first limit it
    breaks (output, status channel, or one its watcher reports) the result keeps the limit and
    the child's process group is killed. `finish`, once the group is gone, ends the other tasks
    and waits for the readers to reach EOF (bounded)."""

    def __init__(self, result: ChildResult, pgid: int, spec: ChildSpec) -> None:
        self.result, self.pgid = result, pgid
        self.output = [0]
        """stdout and stderr bytes so far: the two share one cap."""
        self.readers: list[asyncio.Future[None]] = []
        self.others: list[asyncio.Future[None]] = []
        if spec.watcher is not None:
            self.also(_watch(spec.watcher, spec.watch_interval, self.breach))

    def breach(self, limit: str) -> None:
        if self.result.limit is None:
            self.result.limit = limit
        _signal_group(self.pgid)

    def on(self, limit: str) -> Callable[[], None]:
        return lambda: self.breach(limit)

    def read(self, reader: Awaitable[None]) -> None:
        self.readers.append(asyncio.ensure_future(reader))

    def also(self, task: Awaitable[None]) -> None:
        self.others.append(asyncio.ensure_future(task))

    async def finish(self) -> None:
        await _finish(self.readers, self.others)


async def run_child(spec: ChildSpec, status_fd_slot: Callable[[int], bytes] | None = None) -> ChildResult:
    """Run `spec.argv` in a new session; return when it and its process group are gone.

    With `spec.status_channel`, a pipe is made and its write end inherited by the child;
    `status_fd_slot(fd)` builds the stdin payload that tells the child which fd it is."""
    result = ChildResult()
    status_r, status_w = os.pipe() if spec.status_channel else (-1, -1)
    payload = spec.stdin
    if spec.status_channel and status_fd_slot is not None:
        payload = status_fd_slot(status_w)
    try:
        process = await asyncio.create_subprocess_exec(
            *spec.argv,
            stdin=asyncio.subprocess.PIPE if payload is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(spec.env),
            cwd=spec.cwd,
            start_new_session=True,
            pass_fds=(status_w,) if spec.status_channel else (),
        )
    except BaseException:
        if spec.status_channel:
            os.close(status_r)
        raise
    finally:
        if spec.status_channel:
            os.close(status_w)

    limits = Limits(result, process.pid, spec)
    assert process.stdout is not None and process.stderr is not None
    limits.read(_drain(process.stdout, result.stdout, limits.output, spec.output_cap, limits.on("output")))
    limits.read(_drain(process.stderr, result.stderr, limits.output, spec.output_cap, limits.on("output")))
    if spec.status_channel:
        limits.read(_drain_fd(status_r, result.status, spec.status_cap, limits.on("status")))
    if payload is not None:
        limits.also(_feed(process, payload))
    try:
        async with asyncio.timeout(spec.wall_seconds):
            await process.wait()
    except TimeoutError:
        result.timed_out = True
    finally:
        result.pgid_gone = await kill_group(process)
        await limits.finish()
    result.returncode = process.returncode
    return result


async def _feed(process: asyncio.subprocess.Process, payload: bytes) -> None:
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(payload)
        await process.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.close()


async def _drain(
    stream: asyncio.StreamReader, capture: Capture, shared: list[int], cap: int, on_cap: Callable[[], None]
) -> None:
    while chunk := await stream.read(CHUNK):
        capture.add(chunk)
        shared[0] += len(chunk)
        if shared[0] > cap:
            on_cap()


async def _drain_fd(
    fd: int, capture: Capture, cap: int, on_cap: Callable[[], None], shared: list[int] | None = None
) -> None:
    """Read a pipe to EOF; `shared` counts bytes across pipes that share one cap (stdout + stderr)."""
    counted = shared if shared is not None else [0]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while chunk := await reader.read(CHUNK):
            capture.add(chunk)
            counted[0] += len(chunk)
            if counted[0] > cap:
                on_cap()
    finally:
        transport.close()


async def _watch(watcher: Watcher, interval: float, breach: Callable[[str], None]) -> None:
    while True:
        await asyncio.sleep(interval)
        limit = await asyncio.to_thread(watcher)
        if limit is not None:
            breach(limit)
            return


async def _finish(readers: Sequence[asyncio.Future[None]], others: Sequence[asyncio.Future[None]]) -> None:
    for task in others:
        task.cancel()
    # The group is dead, so the pipes reach EOF; a pipe held open from outside the group (which
    # the sandbox does not allow) is given up on after a grace period instead of hanging the run.
    done, pending = await asyncio.wait(readers, timeout=DRAIN_GRACE_S) if readers else (set(), set())
    for task in pending:
        task.cancel()
    for task in [*others, *pending]:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
    for task in done:
        with contextlib.suppress(Exception):
            task.result()


def _signal_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def kill_group(process: asyncio.subprocess.Process) -> bool:
    """Kill whatever is left of the child's process group; True when the group is gone."""
    pgid = process.pid
    _signal_group(pgid)
    with contextlib.suppress(ProcessLookupError):
        await process.wait()
    return await group_gone(pgid)


async def group_gone(pgid: int) -> bool:
    """Kill the group's members still running until there are none (about 2 s at most)."""
    for _ in range(100):
        if not live_members(pgid):
            return True
        _signal_group(pgid)
        await asyncio.sleep(0.02)
    return False


def live_members(pgid: int) -> list[int]:
    """Processes of the group that still run. Zombies (dead, waiting for a parent that is not
    ours to reap them, e.g. after bubblewrap's PID namespace) do not count."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            live.append(int(entry))
    return live


def signal_name(returncode: int | None) -> str | None:
    """The signal that ended a child: a negative return code, or bubblewrap's 128 + signal."""
    if returncode is None:
        return None
    number = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 128 + 65 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
