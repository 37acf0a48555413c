"""The path guard: every path argument of every exploration tool goes through here.

A path is resolved against the root with symlinks resolved and must stay inside it; then the
file is opened by walking from the root's descriptor one component at a time with
`O_NOFOLLOW`, so a symlink swapped in after the check is refused rather than followed, and the
final descriptor must be a regular file (or a folder for listings). Every refusal is the same
`OutOfBounds` with the same message, which the tools turn into a result the model can act on.

Standard library only: the figure sandbox's child process loads this file directly.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

OUT_OF_BOUNDS = "path does not exist or is out of bounds"

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not hang waiting for a writer.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class OutOfBounds(Exception):
    """The path is outside the root, missing, or not the kind of file asked for."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(OUT_OF_BOUNDS)
        self.detail = detail  # for logs and tests; the model only sees OUT_OF_BOUNDS


class PathGuard:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(os.path.realpath(root))

    def check(self, path: str) -> PurePosixPath:
        """The path relative to the root, symlinks resolved; raises OutOfBounds."""
        if not isinstance(path, str) or "\x00" in path:
            raise OutOfBounds("not a string or contains a NUL byte")
        text = path.strip()
        if text in ("", ".", "./"):
            return PurePosixPath(".")
        if os.path.isabs(text) or text.startswith("~"):
            raise OutOfBounds("absolute path")
        if not os.path.lexists(self.root / text) and (real := real_name(text)) != text:
            text = real  # a name shown with \xNN for bytes that are not UTF-8
        resolved = Path(os.path.realpath(self.root / text))
        if not resolved.is_relative_to(self.root):
            raise OutOfBounds("resolves outside the root")
        if not os.path.lexists(resolved):
            raise OutOfBounds("does not exist")
        return PurePosixPath(resolved.relative_to(self.root).as_posix())

    def open_file(self, path: str) -> int:
        """A read-only descriptor of a regular file inside the root (caller closes it)."""
        return self.open_checked(self.check(path))

    def open_dir(self, path: str) -> int:
        """A descriptor of a folder inside the root (caller closes it)."""
        return self._walk(self.check(path), want_dir=True)

    def open_checked(self, rel: PurePosixPath) -> int:
        """Open an already checked path without following any link met on the way."""
        return self._walk(rel, want_dir=False)

    def _walk(self, rel: PurePosixPath, *, want_dir: bool) -> int:
        parts = [p for p in rel.parts if p != "."]
        if any(p == ".." for p in parts):
            raise OutOfBounds("parent reference after resolution")
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                flags = _FILE_FLAGS if last and not want_dir else _DIR_FLAGS
                try:
                    child = os.open(part, flags, dir_fd=fd)
                except OSError as error:  # ELOOP: a link; ENOTDIR; ENOENT; ENXIO
                    raise OutOfBounds(f"open failed: {error.strerror}") from None
                os.close(fd)
                fd = child
            mode = os.fstat(fd).st_mode
            if want_dir and not stat.S_ISDIR(mode):
                raise OutOfBounds("not a folder")
            if not want_dir and not stat.S_ISREG(mode):
                raise OutOfBounds("not a regular file")
            if not want_dir:
                os.set_blocking(fd, True)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def relative(self, path: str) -> str:
        """The canonical relative posix path, as shown (valid text); raises OutOfBounds."""
        return shown_name(self.check(path).as_posix())


# -- file names are bytes --------------------------------------------------------------------
# POSIX file names are byte strings; Python hands undecodable bytes over as lone surrogates
# ("caf\udce9"), which no JSON encoder, LaTeX engine or web page accepts. Everywhere a name
# leaves the scan it is shown with each undecodable byte written as \xNN ("caf\xe9.csv"): valid
# text, readable, and found again by `real_name`. The guard tries a name as given first, so a
# file really called "a\x41" is still found under its own name.

_ESCAPED = re.compile(r"(?:\\x[0-9a-fA-F]{2})+")


def shown_name(name: str) -> str:
    """`name` as valid text: undecodable bytes (surrogates) written as \\xNN."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", errors="backslashreplace")


def real_name(shown: str) -> str:
    """The file-system name (surrogate-escaped str) a shown name stands for."""
    if "\\x" not in shown:
        return shown

    def unescape(match: re.Match[str]) -> str:
        raw = bytes(int(match.group(0)[i + 2 : i + 4], 16) for i in range(0, len(match.group(0)), 4))
        return os.fsdecode(raw)

    return _ESCAPED.sub(unescape, shown)


def safe_text(text: str) -> str:
    """Any text with lone surrogates replaced (\\xNN for undecodable bytes), safe for JSON."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="backslashreplace")
