"""The scan walked by two processes (`parallel.py`) against the single-process walk: the same
listing, skipped entries and sizes on awkward trees (odd names, links, loops, FIFOs, deep and
unreadable folders), whoever walks what; and when the worker cannot start, dies, is killed or
talks nonsense, the same result still."""

from __future__ import annotations

import io
import marshal
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from loopwarden.report.folder import parallel
from loopwarden.report.folder.parallel import SharedWalk, walk_tree
from loopwarden.report.folder.paths import shown_name
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.folder.walk import Channel, Columns, Step, give, walk
from loopwarden.report.folder.walk import shown_name as walk_shown_name
from test_report_scan_fast import HIDDEN_AFTER_ANOTHER, build, entries

Listing = tuple[list[str], list[int], list[str], list[tuple[str, str]]]


def single(real_root: str) -> Listing:
    out = Columns()
    walk(real_root, "", real_root, out)
    return out.paths, out.sizes, out.exts, sorted(out.skipped)


def shared(real_root: str, walker: SharedWalk | None = None) -> tuple[Listing, SharedWalk]:
    walker = walker or SharedWalk(real_root, start_after=0, wait_ready=True, when_busy=True)
    try:
        paths, sizes, exts, skipped = walker.run()
    finally:
        walker.close()
    assert walker.worker is None  # stopped and waited for
    return (paths, sizes, exts, sorted(skipped)), walker


def awkward_tree(base: Path) -> str:
    """Odd names (newline, space, bytes that are not UTF-8, names sorting around "d/"), a link
    loop, links in and out, a FIFO, hidden and VCS folders, a chain too deep for a full path
    (ENAMETOOLONG: unreadable whatever the user), a folder without permissions (unreadable when
    not run as root) and enough plain folders for both processes to get some."""
    root = base / "data"
    root.mkdir()
    (base / "outside.csv").write_bytes(b"out")
    for i in range(12):
        folder = root / f"run{i:02d}" / "sub"
        folder.mkdir(parents=True)
        for j in range(5):
            (folder / f"f{j}.csv").write_bytes(b"x" * (i + j))
        (root / f"run{i:02d}" / "notes.md").write_bytes(b"n" * i)
    for parent in ("run03", "run11"):  # the first half stays with the scanner, the second is lent
        odd = os.fsencode(root / parent) + b"/caf\xe9 \nline"
        os.mkdir(odd)
        for name in (b"a\xff.csv", b"new\nline.txt", b" space.md", b"d-1", b"d.x", b"\xfe"):
            with open(os.path.join(odd, name), "wb") as f:
                f.write(name)
        os.mkdir(os.path.join(odd, b"d"))
        with open(os.path.join(odd, b"d", b"in.csv"), "wb") as f:
            f.write(b"1")
        (root / parent / "loop").symlink_to(root / parent)
    (root / "run04" / "loop").symlink_to(root)
    (root / "run04" / "self").symlink_to(root / "run04" / "self")
    (root / "run05" / "alias.csv").symlink_to(root / "run05" / "notes.md")
    (root / "run05" / "out.csv").symlink_to(base / "outside.csv")
    (root / "run05" / "broken").symlink_to(root / "gone")
    os.mkfifo(root / "run06" / "pipe")
    (root / "run07" / ".git").mkdir()
    (root / "run07" / ".git" / "HEAD").write_bytes(b"ref")
    (root / "run07" / ".hidden.csv").write_bytes(b"h")
    (root / "run07" / "node_modules").mkdir()
    locked = root / "run08" / "locked"
    locked.mkdir()
    (locked / "secret.csv").write_bytes(b"s")
    locked.chmod(0)
    deep = os.open(root / "run09", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(40):  # 40 x 120 characters: past PATH_MAX (4096)
            os.mkdir("d" * 120, dir_fd=deep)
            child = os.open("d" * 120, os.O_RDONLY | os.O_DIRECTORY, dir_fd=deep)
            os.close(deep)
            deep = child
        with open(os.open("leaf.csv", os.O_WRONLY | os.O_CREAT, dir_fd=deep), "wb") as f:
            f.write(b"deep")
    finally:
        os.close(deep)
    return os.path.realpath(root)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[str]:
    real_root = awkward_tree(tmp_path)
    yield real_root
    (Path(real_root) / "run08" / "locked").chmod(0o700)  # so that pytest can remove it
    # The chain is deeper than a path can be: remove it one descriptor at a time.
    _remove_chain(os.path.join(real_root, "run09"))


def _remove_chain(folder: str) -> None:
    fds = [os.open(folder, os.O_RDONLY | os.O_DIRECTORY)]
    while True:
        try:
            fds.append(os.open("d" * 120, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        except FileNotFoundError:
            break
    os.unlink("leaf.csv", dir_fd=fds[-1])
    for parent, child in zip(fds[-2::-1], fds[:0:-1], strict=True):
        os.close(child)
        os.rmdir("d" * 120, dir_fd=parent)
    os.close(fds[0])


def test_the_awkward_tree_walks_as_it_should(tree: str) -> None:
    paths, _, _, skipped = single(tree)
    reasons = dict(skipped)
    assert "run03/caf\\xe9 \nline/a\\xff.csv" in paths and "run03/caf\\xe9 \nline/d/in.csv" in paths
    assert reasons["run04/loop"].startswith("symlink to a folder") and "run05/alias.csv" in paths
    assert "File name too long" in reasons[next(p for p in reasons if p.startswith("run09/"))]
    if os.geteuid() != 0:  # root reads any folder
        assert reasons["run08/locked"] == "unreadable folder: Permission denied"


class Lender(SharedWalk):
    """Never asks the worker for work back: what it is lent, it walks."""

    def __init__(self, real_root: str) -> None:
        super().__init__(real_root, start_after=0, wait_ready=True, when_busy=True)
        self.may_ask = False

    def take_messages(self) -> None:
        super().take_messages()
        self.may_ask = False


def test_shared_walk_equals_the_single_one(tree: str) -> None:
    listing, walker = shared(tree, Lender(tree))
    assert listing == single(tree)
    assert walker.failure is None
    # Lent as soon as the worker was ready (the root lists 12 folders): the second half of them,
    # with odd names, a link loop, the unreadable folders and the chain too deep for a path.
    assert {"run08/", "run09/", "run11/"} <= set(walker.by_worker)


def test_scan_folder_in_two_processes_equals_one(tree: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "START_AFTER_FILES", 0)
    monkeypatch.setattr(parallel, "free_cores", lambda: 2)
    alone = scan_folder(Path(tree), parallel=False)
    for _ in range(3):  # who walks what depends on timing: each run must agree
        assert scan_folder(Path(tree), parallel=True) == alone
        assert scan_folder(Path(tree), parallel=True).skipped == alone.skipped


class LendAndKill(SharedWalk):
    """Kills the worker (SIGKILL) as it is lent its `kill_after`-th batch, just before it is sent
    (killed just after, it could walk a small batch before the kill landed)."""

    def __init__(self, real_root: str, kill_after: int) -> None:
        super().__init__(real_root, start_after=0, wait_ready=True, when_busy=True)
        self.kill_after = kill_after
        self.lent_batches = 0

    def lend(self, folders: list[tuple[str, str]]) -> None:
        self.lent_batches += 1
        if self.lent_batches == self.kill_after and self.worker is not None:
            os.kill(self.worker.pid, signal.SIGKILL)
        super().lend(folders)


@pytest.mark.parametrize("kill_after", [1, 2])
def test_a_killed_worker_loses_nothing(tree: str, kill_after: int) -> None:
    walker = LendAndKill(tree, kill_after)
    listing, _ = shared(tree, walker)
    assert listing == single(tree)
    if walker.lent_batches >= kill_after:
        assert walker.failure is not None


# The real worker, killing itself (SIGKILL) just before or after sending its first result.
DIES = """import os, signal, sys
sys.path.insert(0, sys.argv[1])
import walk
send = walk.Channel.send
def dying(self, message):
    if message[0] == "R" and {after}:
        send(self, message)
    if message[0] == "R":
        os.kill(os.getpid(), signal.SIGKILL)
    send(self, message)
walk.Channel.send = dying
walk.serve(sys.argv[2])
"""


@pytest.mark.parametrize(
    "command",
    [
        ["/nonexistent/python"],  # cannot start
        [sys.executable, "-c", "pass"],  # leaves at once
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\x05' + bytes(7) + b'junk!')"],
        [sys.executable, "-c", DIES.format(after=False)],
        [sys.executable, "-c", DIES.format(after=True)],
    ],
    ids=["missing", "exits", "garbage", "dies-before-result", "dies-after-result"],
)
def test_a_failing_worker_loses_nothing(tree: str, command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = parallel.worker_command(tree)
    monkeypatch.setattr(parallel, "worker_command", lambda root: [*command, *real[-2:]])
    walker = Lender(tree)  # never asking work back: whatever it was sent, it still held
    listing, _ = shared(tree, walker)
    assert listing == single(tree)
    assert walker.failure is not None


def test_a_worker_still_starting_when_the_walk_ends_is_stopped_not_waited_for(
    tree: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It never says it is ready: waiting for it would never end.
    monkeypatch.setattr(parallel, "worker_command", lambda root: [sys.executable, "-c", "import time; time.sleep(600)"])
    walker = SharedWalk(tree, start_after=0, when_busy=True)
    worker: list[object] = []
    start = walker.start
    monkeypatch.setattr(walker, "start", lambda: (start(), worker.append(walker.worker)))
    listing, _ = shared(tree, walker)
    assert listing == single(tree) and walker.by_worker == []
    assert worker[0].returncode == -signal.SIGKILL  # type: ignore[attr-defined]


def test_a_failure_in_the_machinery_falls_back_to_one_process(tree: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def broken(results: object) -> Listing:
        calls.append(results)
        raise KeyError("a hole without a listing")

    monkeypatch.setattr(parallel, "assemble", broken)
    monkeypatch.setattr(parallel, "START_AFTER_FILES", 0)
    monkeypatch.setattr(parallel, "free_cores", lambda: 2)
    paths, sizes, exts, skipped = walk_tree(tree, parallel=True)
    assert (paths, sizes, exts, sorted(skipped)) == single(tree) and calls


def test_small_trees_and_the_switch_stay_in_one_process(tree: str, monkeypatch: pytest.MonkeyPatch) -> None:
    walker = SharedWalk(tree)  # fewer files than START_AFTER_FILES
    listing, _ = shared(tree, walker)
    assert listing == single(tree) and not walker.started

    def refused(*args: object, **kwargs: object) -> SharedWalk:
        raise AssertionError("a worker was considered")

    monkeypatch.setattr(parallel, "SharedWalk", refused)
    monkeypatch.setattr(parallel, "START_AFTER_FILES", 0)
    monkeypatch.setenv("LOOPWARDEN_SCAN_PARALLEL", "0")
    assert scan_folder(Path(tree)) == scan_folder(Path(tree), parallel=False)
    monkeypatch.delenv("LOOPWARDEN_SCAN_PARALLEL")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})  # one core to run on
    assert scan_folder(Path(tree)) == scan_folder(Path(tree), parallel=False)


@given(entries)
@example(HIDDEN_AFTER_ANOTHER)
def test_shared_walk_of_generated_trees(tmp_path_factory, spec) -> None:  # type: ignore[no-untyped-def]
    real_root = os.fsdecode(build(tmp_path_factory.mktemp("tree"), spec))
    listing, walker = shared(real_root)
    assert listing == single(real_root)
    assert walker.failure is None


@given(st.text(max_size=8) | st.binary(max_size=8).map(os.fsdecode))
def test_the_walks_shown_name_is_the_paths_one(name: str) -> None:
    assert walk_shown_name(name) == shown_name(name)


def test_give_hands_over_the_bottom_half_of_the_folders() -> None:
    stack: list[Step] = [("/r/a", "a/", None, None), ("/r", "", ["x"], [1]), ("/r/b", "b/", None, None)]
    stack += [("/r/c", "c/", None, None), ("/r/d", "d/", None, None)]
    assert give(stack) == [("/r/b", "b/"), ("/r/a", "a/")]
    assert [step[2:] for step in stack] == [([], None), (["x"], [1]), ([], None), (None, None), (None, None)]
    assert give(stack) == [("/r/c", "c/")]
    assert give(stack) == []  # the last folder is this side's next work


def test_the_worker_walks_what_it_is_sent_and_hands_back_what_it_has_not_started(tree: str) -> None:
    # The real worker driven by hand: asked for work back before its first folder is listed, it
    # hands back the later half of the folders it has not started, and walks the rest.
    worker = subprocess.Popen(parallel.worker_command(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert worker.stdin is not None and worker.stdout is not None
    try:
        channel = Channel(worker.stdout.fileno(), worker.stdin.fileno())
        assert channel.recv() == ("I",)
        sent = [(os.path.join(tree, f"run{i:02d}"), f"run{i:02d}/") for i in (8, 9, 10, 11)]
        # One write for both, as the scanning process's back-to-back sends can arrive: two writes
        # would race the worker (under load it could list run08 before the request came).
        both = b"".join(len(data).to_bytes(8, "little") + data for data in map(marshal.dumps, [("W", sent), ("T",)]))
        assert len(both) <= select.PIPE_BUF  # a pipe write this size lands whole: one read takes both
        os.write(worker.stdin.fileno(), both)
        messages = [channel.recv() for _ in range(4)]
        assert messages[0] == ("G", sent[2:])
        assert [m[:2] for m in messages[1:]] == [("R", "run08/"), ("R", "run09/"), ("I",)]
        for (folder, rel), (_, _, paths, sizes, exts, holes, skipped) in zip(sent, messages[1:3], strict=False):
            out = Columns()
            walk(folder, rel, tree, out)
            assert (paths, sizes, exts, holes, skipped) == (out.paths, out.sizes, out.exts, [], out.skipped)
    finally:
        worker.stdin.close()
        assert worker.wait(timeout=60) == 0  # it leaves when its stdin closes
        worker.stdout.close()


def test_no_worker_without_a_free_core(tree: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "free_cores", lambda: 1)
    walker = SharedWalk(tree, start_after=0)
    listing, _ = shared(tree, walker)
    assert listing == single(tree) and walker.started and walker.by_worker == [] and walker.failure is None
    monkeypatch.setattr(parallel, "worker_command", lambda root: ["/nonexistent/python"])
    monkeypatch.setattr(parallel, "free_cores", lambda: 2)
    walker = SharedWalk(tree, start_after=0)
    shared(tree, walker)
    assert walker.failure is not None  # with a free core, a worker was tried


def test_free_cores_counts_the_runnable_tasks_besides_this_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    real_open = open

    def loadavg(text: bytes) -> None:
        monkeypatch.setattr(
            "builtins.open", lambda path, *a: io.BytesIO(text) if path == "/proc/loadavg" else real_open(path, *a)
        )

    loadavg(b"3.02 4.47 5.97 1/102 17946\n")
    assert parallel.free_cores() == 2
    loadavg(b"3.02 4.47 5.97 2/102 17946\n")  # one busy task besides this one
    assert parallel.free_cores() == 1
    loadavg(b"garbled")
    assert parallel.free_cores() == 2
