"""The figure zygote (report/sandbox/zygote.py, forkserver.py): figures forked from one process
that imported the plotting stack get what a spawned figure gets (environment, open fds, their own
Landlock), cannot reach each other, and a zygote that dies or cannot start never loses a figure
or leaves a process behind. Real processes, real kernel."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import sandboxkit
from loopwarden.report.sandbox import forkserver
from loopwarden.report.sandbox.isolation import probe_isolation
from loopwarden.report.sandbox.runner import FigureOutcome, FigureSandbox, Limits

folders = sandboxkit.folders  # the fixture
ISOLATION = probe_isolation()
needs_landlock = pytest.mark.skipif(
    ISOLATION.layer != "landlock+seccomp", reason="the zygote serves the Landlock layer only"
)
PROBE = (
    "os = matplotlib.os\n"
    "def is_open(fd):\n"
    "    try:\n        os.fstat(fd)\n        return True\n    except OSError:\n        return False\n"
    "print(repr({'env': dict(os.environ), 'cwd': os.getcwd(), 'fds': [f for f in range(4096) if is_open(f)]}))\n"
    "plt.plot([1])\n"
)
GO = b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }" + b" " * 60 + b"\n"
"""An empty float array as an .npy file: the go-ahead a waiting figure polls for."""
WAIT_FOR_GO = (
    "while True:\n    try:\n        np.load('go.npy')\n        break\n    except Exception:\n        pass\n"
    "plt.plot([1])\n"
)


@pytest.fixture(autouse=True)
def start_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test has the whole start budget. The zygote is shared, as in a host that runs many
    figures: a test uses the one an earlier test (here or in another sandbox module) left running,
    or starts it; every test leaves it serving or gone (killed: the next test starts another). Each
    start imports the plotting stack (about a second of CPU). A test that must see a start from no
    zygote stops the running one first."""
    monkeypatch.setattr(forkserver, "_starts", [0])


def sandbox(folders: tuple[Path, Path]) -> FigureSandbox:
    return FigureSandbox(*folders, ISOLATION, limits=Limits(wall_seconds=120))


def zygote_pid() -> int:
    assert forkserver._current, "no zygote is running"
    return forkserver._current[0].process.pid


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def zygote_of(pid: int) -> list[int]:
    found = []
    for child in children_of(pid):
        with contextlib.suppress(OSError):  # a short-lived child (the font list's) may be gone
            if b"zygote.py" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
    return found


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_until(what: str, check: Callable[[], object], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def probe(folders: tuple[Path, Path]) -> dict[str, object]:
    outcome = asyncio.run(sandbox(folders).run(PROBE, "probe"))
    assert outcome.ok, outcome.message
    value = ast.literal_eval(outcome.output)
    assert isinstance(value, dict)
    return value


@needs_landlock
def test_a_forked_figure_gets_what_a_spawned_one_gets(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    forked = probe(folders)
    zygote = zygote_pid()
    assert len(os.listdir(f"/proc/{zygote}/task")) == 1  # single-threaded, as it asserts before a fork
    monkeypatch.setenv(forkserver.SWITCH, "0")
    spawned = probe(folders)
    # stdio and the status channel (a spawned child keeps the host's number for it, maybe > 255)
    fds: list[int] = spawned["fds"]  # type: ignore[assignment]
    assert forked["fds"] == [0, 1, 2, 3] and fds[:3] == [0, 1, 2] and len(fds) == 4
    assert {**forked, "fds": None} == {**spawned, "fds": None} and forked["cwd"] == "."
    assert {key: value for key, value in forked["env"].items() if key != "LC_CTYPE"} == {  # type: ignore[attr-defined]
        "MPLCONFIGDIR": "<sandbox>/mpl",
        "MPLBACKEND": "Agg",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


@needs_landlock
def test_forked_figures_draw_their_own_random_numbers(folders: tuple[Path, Path]) -> None:
    box = sandbox(folders)
    drawn = [asyncio.run(box.run("print(np.random.rand())\nplt.plot([1])", f"r{i}")) for i in range(2)]
    assert all(outcome.ok for outcome in drawn) and drawn[0].output != drawn[1].output
    assert children_of(zygote_pid()) == []  # both reaped


@needs_landlock
def test_figures_running_together_cannot_reach_each_other(folders: tuple[Path, Path]) -> None:
    box = sandbox(folders)
    first = folders[1] / ".sandbox" / "fig1" / "work"

    async def both() -> tuple[FigureOutcome, FigureOutcome, FigureOutcome]:
        waiting = asyncio.ensure_future(box.run("np.save('mine.npy', np.ones(3))\n" + WAIT_FOR_GO, "first"))
        await asyncio.to_thread(wait_until, "the first figure's file", (first / "mine.npy").exists)
        read = await box.run(f"np.load({str(first / 'mine.npy')!r})\nplt.plot([1])", "read")
        write = await box.run(f"np.save({str(first / 'evil.npy')!r}, np.ones(1))\nplt.plot([1])", "write")
        (first / "go.npy").write_bytes(GO)
        return await waiting, read, write

    done, read, write = asyncio.run(both())
    assert done.ok, done.message
    assert not read.ok and read.error_type == "PermissionError", read.message
    assert not write.ok and write.error_type == "PermissionError", write.message


@needs_landlock
def test_a_zygote_killed_mid_figure_loses_nothing(folders: tuple[Path, Path]) -> None:
    box = sandbox(folders)
    asyncio.run(box.run("plt.plot([1])", "warm"))
    zygote = zygote_pid()
    work = folders[1] / ".sandbox" / "fig2" / "work"

    async def run() -> tuple[FigureOutcome, int]:
        task = asyncio.ensure_future(box.run(WAIT_FOR_GO, "survivor"))
        await asyncio.to_thread(wait_until, "the forked figure", lambda: children_of(zygote))
        child = children_of(zygote)[0]
        os.kill(zygote, signal.SIGKILL)
        while not task.done():  # the figure is spawned again, from a fresh folder: let it finish
            if work.is_dir():
                with contextlib.suppress(OSError):  # the folder is made afresh under us
                    (work / "go.tmp").write_bytes(GO)
                    (work / "go.tmp").rename(work / "go.npy")
            await asyncio.sleep(0.05)
        return task.result(), child

    outcome, child = asyncio.run(run())
    assert outcome.ok, outcome.message
    wait_until("the orphaned figure child to die with its zygote", lambda: not running(child), 10)
    assert not running(zygote)
    assert asyncio.run(box.run("plt.plot([2])", "after")).ok  # a new zygote
    assert zygote_pid() != zygote


@needs_landlock
def test_a_zygote_that_cannot_start_leaves_figures_to_spawn(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forkserver.stop()
    broken = tmp_path / "zygote.py"
    broken.write_text("import sys\nsys.exit(3)\n")
    monkeypatch.setattr(forkserver.zygote_module, "__file__", str(broken))
    outcome = asyncio.run(sandbox(folders).run("plt.plot([1])", "f"))
    assert outcome.ok, outcome.message
    assert "the figure zygote did not start (it exited with status 3 before it was ready)" in caplog.text
    assert forkserver._current == [] and forkserver.get({}, []) is None  # no second try: spawn


HOST = """
import asyncio, sys
from pathlib import Path
from loopwarden.report.sandbox.isolation import probe_isolation
from loopwarden.report.sandbox.runner import FigureSandbox, Limits
box = FigureSandbox(Path(sys.argv[1]), Path(sys.argv[2]), probe_isolation(), limits=Limits(wall_seconds=300))
asyncio.run(box.run("while True:\\n    pass", "spin"))
"""


@needs_landlock
def test_the_zygote_and_its_figures_end_with_a_killed_host(folders: tuple[Path, Path]) -> None:
    host = subprocess.Popen([sys.executable, "-c", HOST, *map(str, folders)], start_new_session=True)
    try:
        wait_until("the host's zygote", lambda: zygote_of(host.pid))
        zygote = zygote_of(host.pid)[0]
        wait_until("the spinning figure", lambda: children_of(zygote))
        figure = children_of(zygote)[0]
        host.kill()
        host.wait()
        wait_until("the zygote to end", lambda: not running(zygote), 10)
        wait_until("the figure to end", lambda: not running(figure), 10)
    finally:
        with_group = host.pid
        if host.poll() is None:
            os.killpg(with_group, signal.SIGKILL)
            host.wait()


@needs_landlock
def test_a_figure_cannot_signal_or_trace_its_zygote(folders: tuple[Path, Path]) -> None:
    box = sandbox(folders)
    assert asyncio.run(box.run("plt.plot([1])", "warm")).ok
    zygote = zygote_pid()
    libc = "libc = np.ctypeslib.ctypes.CDLL(None)\n"
    for attack in ("rc = libc.kill(libc.getppid(), 9)", "rc = libc.ptrace(16, libc.getppid(), None, None)"):
        outcome = asyncio.run(box.run(libc + attack + "\nplt.plot([rc])", "attack"))
        assert not outcome.ok and outcome.error_type == "denied_operation", (attack, outcome.message)
        assert running(zygote) and zygote_pid() == zygote, attack


@needs_landlock
def test_a_cancelled_figure_is_killed_and_the_zygote_serves_on(folders: tuple[Path, Path]) -> None:
    box = sandbox(folders)
    assert asyncio.run(box.run("plt.plot([1])", "warm")).ok
    zygote = zygote_pid()

    async def cancel() -> int:
        task = asyncio.ensure_future(box.run(WAIT_FOR_GO, "cancelled"))
        await asyncio.to_thread(wait_until, "the forked figure", lambda: children_of(zygote))
        child = children_of(zygote)[0]
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return child

    child = asyncio.run(cancel())
    assert not running(child) and children_of(zygote) == []
    assert asyncio.run(box.run("plt.plot([2])", "after")).ok and zygote_pid() == zygote
