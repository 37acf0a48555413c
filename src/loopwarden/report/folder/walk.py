"""The scan's walk of a folder tree, standard library only.

Both sides of a parallel scan run this file: the scanning process imports it as part of the
package, and the worker process (`parallel.py`) runs it as a plain module under `python -I -S`,
so it imports nothing from the package and no slow-to-import module (pathlib and re together
cost the worker 30 ms of start-up): `serve()` at the bottom is the worker's side.

The walk emits the files of each folder step in path order into `Columns`. A folder step can be
handed to the other process (`give`): it stays on the stack as a hole, and the hole is emitted
where that subtree's files go, to be filled with the other side's result when the scan is
assembled.
"""

from __future__ import annotations

import os
import select
import stat
from bisect import bisect_left
from itertools import compress, repeat
from marshal import dumps, loads
from operator import attrgetter, itemgetter, not_

TYPE_CHECKING = False  # typing itself is slow to import; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable

SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", ".git", ".hg", ".svn", ".ipynb_checkpoints"})

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def shown_name(name: str) -> str:
    """`paths.shown_name`, copied on purpose: neither module can import the other. This one
    would pay for paths.py's pathlib and re in the worker's start-up (see the module docstring),
    and paths.py is loaded as a bare file by the figure sandbox's child, where a relative import
    fails. tests/test_report_scan_parallel.py checks the two agree."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", errors="backslashreplace")


def extensions(names: list[str]) -> list[str]:
    """`extension(name)` of every name: the lower-cased part after the last dot, "" when the only
    dot leads the name or there is none; C-level passes (a split and a lower-casing per name), with
    a loop in Python only for a batch that has a name of the second kind."""
    parts = list(map(str.rpartition, names, repeat(".")))
    exts = list(map(str.lower, map(_TAIL, parts)))
    if not all(map(_HEAD, parts)):
        exts = [ext if head else "" for ext, (head, _, _) in zip(exts, parts, strict=True)]
    return exts


_HEAD = itemgetter(0)
_TAIL = itemgetter(2)


class Columns:
    """What a walk found, one value per listed file in each column, in path order; `holes` are
    (index, rel) of subtrees walked elsewhere, whose files go before paths[index]; `skipped` is
    (path, reason) of what was left out."""

    __slots__ = ("exts", "holes", "paths", "sizes", "skipped")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.sizes: list[int] = []
        self.exts: list[str] = []
        self.holes: list[tuple[int, str]] = []
        self.skipped: list[tuple[str, str]] = []

    def add(self, rel: str, names: list[str], sizes: list[int]) -> None:
        self.paths += map(rel.__add__, names) if rel else names
        self.sizes += sizes
        self.exts += extensions(names)


# A pending step of the walk: (folder, rel, None, None) lists a folder; (folder, rel, names, sizes)
# emits files of that folder already listed and stat'ed, once everything sorting before them is
# out; (folder, rel, [], None) is a folder handed to the other process, a hole in the listing.
Step = tuple[str, str, list[str] | None, list[int] | None]
_NAME = attrgetter("name")
_SIZE = attrgetter("st_size")
_IS_LINK = os.DirEntry.is_symlink
_IS_FILE = os.DirEntry.is_file
_IS_DIR = os.DirEntry.is_dir
_STAT = os.DirEntry.stat


def walk(start: str, rel: str, real_root: str, out: Columns, tend: Callable[[list[Step]], None] | None = None) -> None:
    """Walk the folder `start`, shown as `rel` ("" for the root, else ending in "/"), into `out`;
    `tend(stack)`, if given, is called after each folder is listed (see `parallel.py`)."""
    # An explicit stack, not recursion: deep trees must not hit Python's recursion limit.
    # Each folder is opened with O_NOFOLLOW (a folder swapped for a symlink after it was listed is
    # refused, not followed) and listed through its descriptor, so the one lstat per file is an
    # fstatat on the bare name, as `find` does, not a walk of the full path again: this loop is
    # what the 100k-file benchmark measures against `find`.
    # The steps are ordered so the files come out sorted by path (see `_list`): sorting 100k
    # paths afterwards (and the sizes and extensions with them) took ~50 ms, a fifth of the scan.
    stack: list[Step] = [(start, rel, None, None)]
    skipped = out.skipped
    while stack:
        current, rel, names, sizes = stack.pop()
        if names is not None:
            if sizes is not None:
                out.add(rel, names, sizes)
            else:
                out.holes.append((len(out.paths), rel))
            continue
        try:
            fd = os.open(current, _DIR_FLAGS)
        except OSError as error:
            skipped.append((rel[:-1] or ".", f"unreadable folder: {error.strerror}"))
            continue
        try:
            _list(fd, current, rel, real_root, out, stack)
        except OSError as error:
            skipped.append((rel[:-1] or ".", f"unreadable folder: {error.strerror}"))
        finally:
            os.close(fd)
        if tend is not None:
            tend(stack)


def give(stack: list[Step]) -> list[tuple[str, str]]:
    """Hand over the bottom half of the folder steps on `stack` (the last in path order, and the
    shallowest: likely the largest subtrees): each becomes a hole; (folder, rel) of each, in path
    order. Nothing when fewer than two are left (the one left is this side's next work)."""
    pending = [i for i, step in enumerate(stack) if step[2] is None]
    if len(pending) < 2:
        return []
    given = pending[: len(pending) // 2]
    for i in given:
        stack[i] = (stack[i][0], stack[i][1], [], None)
    return [(stack[i][0], stack[i][1]) for i in reversed(given)]


def _list(fd: int, current: str, rel: str, real_root: str, out: Columns, stack: list[Step]) -> None:
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=_NAME)  # so `names` below comes out sorted
    real: dict[str, str] = {}
    plain = _plain(entries)
    if plain is not None:
        names, sizes, folders = plain
    else:
        names, sizes, folders = _sort_out(entries, current, rel, real_root, out.skipped, real)
    # Sorted paths from sorted steps: everything under folder "d" starts with rel + "d/", and no
    # file name holds a "/", so it sorts among its folder's files exactly where "d/" does. The
    # folder's files are cut at each subfolder's "d/"; the files before the first one are next
    # in order and go out now (a folder without subfolders never touches the stack).
    if real:  # a shown name may sort elsewhere than the real one did
        order = sorted(range(len(names)), key=names.__getitem__)
        names, sizes = [names[i] for i in order], [sizes[i] for i in order]
    folders.sort()
    lo = bisect_left(names, folders[0]) if folders else len(names)
    out.add(rel, names[:lo], sizes[:lo])
    steps: list[Step] = []
    for i, folder in enumerate(folders, 1):
        steps.append((os.path.join(current, real.get(folder[:-1], folder[:-1])), rel + folder, None, None))
        hi = bisect_left(names, folders[i], lo) if i < len(folders) else len(names)
        if hi > lo:
            steps.append((current, rel, names[lo:hi], sizes[lo:hi]))
        lo = hi
    stack += reversed(steps)


def _plain(entries: list[os.DirEntry[str]]) -> tuple[list[str], list[int], list[str]] | None:
    """(file names, sizes, "folder/" names) of a folder holding only regular files and folders
    with names shown as they are, none hidden or skipped; None for any other folder.

    The common case, done in C-level passes over the folder rather than Python code per entry
    (`_sort_out` below, the general case, gives the same result for such a folder;
    tests/test_report_scan_fast.py checks the two against each other). With no link in the folder,
    `is_file()` and `stat()` without `follow_symlinks=False` read the same `d_type` and make the
    same descriptor-relative lstat.
    """
    names = list(map(_NAME, entries))
    joined = "/".join(names)  # no name holds a "/"
    if not joined.isascii():
        try:
            joined.encode("utf-8")
        except UnicodeEncodeError:  # undecodable bytes: shown as \xNN, which may sort elsewhere
            return None
    if joined[:1] == "." or "/." in joined or not SKIPPED_DIRS.isdisjoint(names) or any(map(_IS_LINK, entries)):
        return None
    is_file = list(map(_IS_FILE, entries))
    if all(is_file):
        files, folders = entries, []
    else:
        others = list(compress(entries, map(not_, is_file)))
        if not all(map(_IS_DIR, others)):  # a FIFO, socket or device
            return None
        files, folders = list(compress(entries, is_file)), [entry.name + "/" for entry in others]
        names = list(compress(names, is_file))
    try:
        sizes: list[int] = list(map(_SIZE, map(_STAT, files)))
    except OSError:  # a file removed or replaced since the listing: the general case says which
        return None
    return names, sizes, folders


def _sort_out(
    entries: list[os.DirEntry[str]],
    current: str,
    rel: str,
    real_root: str,
    skipped: list[tuple[str, str]],
    real: dict[str, str],
) -> tuple[list[str], list[int], list[str]]:
    """(file names, sizes, "folder/" names) of any folder, entry by entry; what is left out goes
    to `skipped`, and a name shown otherwise than it is named goes to `real` (shown -> real)."""
    names: list[str] = []
    sizes: list[int] = []
    folders: list[str] = []
    for entry in entries:
        name = shown_name(entry.name)  # file names are bytes: undecodable ones are shown as \xNN
        if name is not entry.name:
            real[name] = entry.name
        if name[0] == "." or name in SKIPPED_DIRS:
            skipped.append((rel + name, "hidden or VCS"))
        elif entry.is_file(follow_symlinks=False):
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:  # removed or replaced between the listing and the stat
                skipped.append((rel + name, "vanished during the scan"))
                continue
            names.append(name)
            sizes.append(size)
        elif entry.is_dir(follow_symlinks=False):
            folders.append(name + "/")
        elif entry.is_symlink():
            link_size = _link_size(os.path.join(current, entry.name), rel + name, real_root, skipped)
            if link_size is not None:
                names.append(name)
                sizes.append(link_size)
        else:
            skipped.append((rel + name, "not a regular file (FIFO, socket or device)"))
    return names, sizes, folders


def _link_size(link: str, rel_path: str, real_root: str, skipped: list[tuple[str, str]]) -> int | None:
    """The size of the regular file a link inside the root points to; None (and why, in
    `skipped`) for a link leading outside, a broken one or one to a folder (never descended)."""
    target = os.path.realpath(link)
    # Both are absolute, normalised and free of links (realpath): inside means the root's path is
    # a prefix of the target's, component by component (what Path.is_relative_to checks).
    if not (target == real_root or target.startswith(real_root.rstrip("/") + "/")):
        skipped.append((rel_path, "symlink pointing outside the folder"))
        return None
    try:
        info = os.stat(target, follow_symlinks=False)
    except OSError:
        skipped.append((rel_path, "broken symlink"))
        return None
    if stat.S_ISREG(info.st_mode):
        return info.st_size
    skipped.append((rel_path, "symlink to a folder inside the root (not descended)"))
    return None


# -- the two processes' channel ----------------------------------------------------------------
# A frame is 8 bytes of length, then a marshal dump (lists of str and int: no pickle, nothing
# that runs code when loaded). The worker sends ("I",) when it has no work left (the first frame
# says it is ready), ("R", rel, paths, sizes, exts, holes, skipped) for each subtree it walked,
# and ("G", [(folder, rel), ...]) to answer ("T",): the folders it hands back. The scanning
# process sends ("W", [(folder, rel), ...]) to an idle worker and ("T",) when it has run out of
# work itself; it closes the worker's stdin to stop it.


class Channel:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = bytearray()
        self.poller = select.poll()
        self.poller.register(read_fd, select.POLLIN)

    def send(self, message: object) -> None:
        data = dumps(message)  # type: ignore[arg-type]  # a message is made of marshallable values
        for part in (len(data).to_bytes(8, "little"), data):  # not joined: a result is megabytes
            view = memoryview(part)
            while view:
                view = view[os.write(self.write_fd, view) :]

    def ready(self) -> bool:
        """Whether a read would not block (data, or the other end closed)."""
        return bool(self.poller.poll(0))

    def fill(self) -> None:
        """Read what is there (blocks if nothing is); EOFError when the other end is closed."""
        chunk = os.read(self.read_fd, 1 << 20)
        if not chunk:
            raise EOFError("the other process closed the channel")
        self.buffer += chunk

    def take(self) -> tuple[object, ...] | None:
        """The next whole message read so far, if any."""
        buffer = self.buffer
        if len(buffer) < 8:
            return None
        end = 8 + int.from_bytes(buffer[:8], "little")
        if len(buffer) < end:
            return None
        with memoryview(buffer) as view, view[8:end] as frame:  # read in place, not copied
            message = loads(frame)
        del buffer[:end]
        if not isinstance(message, tuple) or not message:
            raise ValueError("not a message")
        return message

    def recv(self) -> tuple[object, ...]:
        while (message := self.take()) is None:
            self.fill()
        return message


def serve(real_root: str) -> None:
    """The worker: walk the folders it is sent, hand some back when asked, until stdin closes."""
    import gc

    gc.disable()  # no cycles made here; see listing.collector_paused
    channel = Channel(0, 1)
    queue: list[tuple[str, str]] = []  # folders sent and not yet walked, the next one last

    def tend(stack: list[Step]) -> None:
        # The request may have been read with the work, when the two were sent back to back.
        if channel.buffer or channel.ready():
            channel.recv()  # ("T",): the only message sent to a busy worker
            if queue:  # the folders not started are the last in path order: hand over half
                half = (len(queue) + 1) // 2
                given = queue[:half][::-1]
                del queue[:half]
            else:
                given = give(stack)
            channel.send(("G", given))

    channel.send(("I",))
    try:
        while True:
            message = channel.recv()
            if message[0] != "W":
                channel.send(("G", []))  # asked for work while idle: there is none
                continue
            queue[:] = reversed(message[1])  # type: ignore[call-overload]
            while queue:
                folder, rel = queue.pop()
                out = Columns()
                walk(folder, rel, real_root, out, tend)
                channel.send(("R", rel, out.paths, out.sizes, out.exts, out.holes, out.skipped))
            channel.send(("I",))
    except (EOFError, BrokenPipeError):  # the scanning process is done (or gone)
        os._exit(0)
