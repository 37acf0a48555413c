"""Reading text by lines, clipped, from a file of any size.

A `LineIndex` scans the file once and keeps the byte offset of every STEP-th line, so a read at
any line offset seeks to the nearest checkpoint and skips at most STEP-1 lines: continuing
through a 1 GB file never re-reads it from the start. The offsets are one int64 array (8 bytes
per checkpoint: 1.5 MiB for 1 GB of 100-byte lines, 32 MiB even for 1 GB of empty lines), and
no line, however long, is ever held whole (`python bench/bench_read_continuation.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

MAX_CHARS = 7000
STEP = 256
_CHUNK = 1 << 20
_NL = 10


@dataclass(eq=False)
class LineIndex:
    checkpoints: npt.NDArray[np.int64]
    """checkpoints[k] = byte offset where line k*STEP starts."""
    total_lines: int
    size: int
    bytes_read: int = 0
    """Bytes read while serving segments (not while indexing): tests check reads stay local."""

    @classmethod
    def build(cls, f: BinaryIO) -> LineIndex:
        f.seek(0)
        parts = [np.zeros(1, dtype=np.int64)]
        line, pos = 0, 0
        tail_newline = True
        while chunk := f.read(_CHUNK):
            newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == _NL)
            # The newline ending line L-1 starts line L; keep those where L is a multiple of STEP.
            first = (-(line + 1)) % STEP
            parts.append(newlines[first::STEP].astype(np.int64) + (pos + 1))
            line += len(newlines)
            pos += len(chunk)
            tail_newline = chunk.endswith(b"\n")
        total = line + (0 if tail_newline else 1)
        checkpoints = np.concatenate(parts)
        if len(checkpoints) > 1 and checkpoints[-1] >= pos:
            checkpoints = checkpoints[:-1]  # a checkpoint at EOF names no line
        return cls(checkpoints=checkpoints, total_lines=total, size=pos)

    def lines(self, f: BinaryIO, offset: int, limit: int) -> list[bytes]:
        """Up to `limit` raw lines from line `offset` (newlines kept)."""
        k = min(offset // STEP, len(self.checkpoints) - 1)
        f.seek(int(self.checkpoints[k]))
        skip = offset - k * STEP
        out: list[bytes] = []
        for _ in range(skip):
            if not self._skip_line(f):
                return out
        while len(out) < limit:
            line = f.readline(MAX_CHARS * 4 + 1)
            if not line:
                break
            self.bytes_read += len(line)
            if not line.endswith(b"\n") and len(line) > MAX_CHARS * 4:
                # An enormous line: keep its head, skip the rest so the next line starts clean.
                while (rest := f.readline(_CHUNK)) and not rest.endswith(b"\n"):
                    self.bytes_read += len(rest)
                self.bytes_read += len(rest)
            out.append(line)
        return out

    def _skip_line(self, f: BinaryIO) -> bool:
        """Move past one line in bounded pieces (a line can be a gigabyte); False at the end."""
        while part := f.readline(_CHUNK):
            self.bytes_read += len(part)
            if part.endswith(b"\n"):
                return True
        return False


@dataclass
class Segment:
    text: str
    start: int
    end: int
    """Lines [start, end) were shown."""
    total_lines: int
    clipped: bool
    chars: int = 0
    notes: list[str] = field(default_factory=list)


def clip_lines(lines: list[str], start: int, total_lines: int, max_chars: int = MAX_CHARS) -> Segment:
    """Join lines up to max_chars; a first line longer than that is cut (and said so)."""
    shown: list[str] = []
    used = 0
    notes: list[str] = []
    for line in lines:
        if used + len(line) > max_chars:
            if not shown:
                shown.append(line[:max_chars])
                notes.append(f"line {start + 1} is {len(line)} characters long; only its first {max_chars} are shown")
            break
        shown.append(line)
        used += len(line)
    end = start + len(shown)
    text = "".join(shown)
    return Segment(
        text=text,
        start=start,
        end=end,
        total_lines=total_lines,
        clipped=end < total_lines,
        chars=len(text),
        notes=notes,
    )


def closing_line(path: str, segment: Segment, limit: int | None) -> str:
    """The one line that says the text was truncated and how to continue."""
    per = f", limit={limit}" if limit else ""
    return (
        f"[truncated: showed lines {segment.start + 1}-{segment.end} of {segment.total_lines}. "
        f'Continue with read_file(path="{path}", offset={segment.end}{per}).]'
    )


def read_indexed(f: BinaryIO, index: LineIndex, offset: int, limit: int | None) -> Segment:
    """A clipped segment of a text file, through its line index."""
    offset = max(offset, 0)
    want = limit if limit and limit > 0 else index.total_lines
    # Never fetch more lines than could fit: each line costs at least one character.
    fetch = min(want, MAX_CHARS + 1)
    raw = index.lines(f, offset, fetch)
    lines = [r.decode("utf-8", errors="replace") for r in raw]
    segment = clip_lines(lines, offset, index.total_lines)
    if limit and segment.end >= offset + limit:
        segment.clipped = segment.end < index.total_lines
    return segment


def looks_binary(head: bytes) -> bool:
    """NUL bytes, or mostly undecodable bytes, in the first block."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
        return False
    except UnicodeDecodeError as error:
        # A multi-byte character cut at the block's end is still text.
        return error.start < len(head) - 4


def file_head(fd: int, n: int = 8192) -> bytes:
    return os.pread(fd, n, 0)
