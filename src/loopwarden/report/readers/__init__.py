"""Readers: what `read_file` shows for each kind of file, always through the path guard.

Text-like files are read by lines through a cached `LineIndex`; PDF/DOCX/IPYNB/JSON are
converted once to text (cached) and then paged the same way; CSV/TSV/XLSX are profiled;
binary files get a clear message instead of bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from io import BufferedReader

from ..folder.paths import PathGuard, shown_name
from ..folder.scan import IMAGE_EXTS, extension
from ..record import TableProfile
from .attributes import MAX_DESCRIPTION_BYTES, Naming, name_columns, related_descriptions
from .documents import CONVERTERS
from .injection import find_injections
from .profile import NotATable
from .tables import TableRead, read_delimited, read_excel
from .text import MAX_CHARS, LineIndex, Segment, clip_lines, closing_line, file_head, looks_binary, read_indexed

__all__ = ["MAX_CHARS", "FileReader", "ReadOutcome"]

TABLE_EXTS = frozenset({"csv", "tsv", "xlsx", "xlsm"})


@dataclass
class ReadOutcome:
    path: str
    text: str
    """What the model sees (content plus, when clipped, the closing line)."""
    mode: str
    """text | document | table | binary | image."""
    chars: int = 0
    total_chars: int | None = None
    start: int = 0
    end: int = 0
    total_lines: int | None = None
    complete: bool = True
    """True when nothing of the file is left unseen after this read."""
    tables: list[TableProfile] = field(default_factory=list)
    read_bytes: int | None = None
    """For a table profiled only in part: how many bytes its statistics cover."""


_Key = tuple[str, int, int]


class FileReader:
    def __init__(self, guard: PathGuard) -> None:
        self.guard = guard
        self._indexes: dict[_Key, LineIndex] = {}
        self._converted: dict[_Key, list[str]] = {}
        self._tables: dict[_Key, TableRead] = {}

    def index_of(self, path: str) -> LineIndex | None:
        """The cached line index of a text file, if it was read (tests check reads stay local)."""
        return next((v for k, v in self._indexes.items() if k[0] == path), None)

    def table(self, path: str) -> TableRead | None:
        return next((v for k, v in self._tables.items() if k[0] == path), None)

    def read(self, path: str, offset: int = 0, limit: int | None = None) -> ReadOutcome:
        """Raises OutOfBounds for anything the guard refuses; other errors are the caller's to report."""
        rel = self.guard.relative(path)
        fd = self.guard.open_file(path)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            key: _Key = (rel, info.st_size, info.st_mtime_ns)
            ext = extension(rel)
            if ext in IMAGE_EXTS:
                return ReadOutcome(
                    rel,
                    f"{rel} is an image ({info.st_size} bytes); use read_image to read it.",
                    "image",
                    complete=False,
                )
            note = ""
            if ext in TABLE_EXTS and offset == 0 and limit is None:
                try:
                    return self._table(f, key, ext)
                except Exception as error:  # not a table after all: show the lines (or say binary)
                    if ext.startswith("xls"):
                        raise
                    why = str(error) if isinstance(error, NotATable) else type(error).__name__
                    note = f"[{rel} could not be profiled as a table ({why}); shown as text]\n"
                    f.seek(0)
            if ext in CONVERTERS:
                return self._document(f, key, ext, offset, limit)
            head = file_head(f.fileno())
            if looks_binary(head):
                return ReadOutcome(rel, _binary_message(rel, info.st_size, head), "binary", complete=False)
            outcome = self._text(f, key, offset, limit)
            outcome.text = note + outcome.text
            return outcome

    def _text(self, f: BufferedReader, key: _Key, offset: int, limit: int | None) -> ReadOutcome:
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = LineIndex.build(f)
        segment = read_indexed(f, index, offset, limit)
        return self._paged(key[0], segment, limit, "text", total_chars=index.size)

    def _document(self, f: BufferedReader, key: _Key, ext: str, offset: int, limit: int | None) -> ReadOutcome:
        lines = self._converted.get(key)
        if lines is None:
            lines = self._converted[key] = CONVERTERS[ext](f).splitlines(keepends=True)
        offset = max(offset, 0)
        window = lines[offset : offset + limit] if limit and limit > 0 else lines[offset : offset + MAX_CHARS + 1]
        segment = clip_lines(window, offset, len(lines))
        if limit and segment.end < offset + limit:
            segment.clipped = True
        segment.clipped = segment.end < len(lines) and (segment.clipped or not limit)
        return self._paged(key[0], segment, limit, "document", total_chars=sum(len(x) for x in lines))

    def _paged(self, rel: str, segment: Segment, limit: int | None, mode: str, total_chars: int) -> ReadOutcome:
        text = segment.text
        if not text and segment.start >= segment.total_lines:
            text = f"[offset {segment.start} is past the end: {rel} has {segment.total_lines} lines]"
        for note in segment.notes:
            text += f"\n[{note}]"
        if segment.clipped:
            text = text.rstrip("\n") + "\n" + closing_line(rel, segment, limit)
        return ReadOutcome(
            rel,
            text,
            mode,
            chars=segment.chars,
            total_chars=total_chars,
            start=segment.start,
            end=segment.end,
            total_lines=segment.total_lines,
            complete=segment.end >= segment.total_lines,
        )

    def _table(self, f: BufferedReader, key: _Key, ext: str) -> ReadOutcome:
        table = self._tables.get(key)
        if table is None:
            xls = ext.startswith("xls")
            namer = partial(self._naming, key[0])
            table = read_excel(f, key[0]) if xls else read_delimited(f, key[0], ext, size=key[1], namer=namer)
            self._tables[key] = table
        segment = clip_lines(table.text.splitlines(keepends=True), 0, len(table.text.splitlines()))
        text = segment.text
        if segment.clipped:
            text += "\n[profile truncated; read raw rows with read_file(path, offset=..., limit=...)]"
        complete = all(p.complete for p in table.profiles)
        return ReadOutcome(
            key[0], text, "table", chars=len(text), total_chars=key[1], complete=complete,
            tables=table.profiles, read_bytes=table.read_bytes,
        )  # fmt: skip

    def _naming(self, rel: str, width: int) -> Naming | None:
        """Names for a headerless table from a description file next to it (attributes.py)."""
        folder = rel.rpartition("/")[0]
        fd = self.guard.open_dir(folder or ".")
        try:
            with os.scandir(fd) as entries:
                names = [e.name for e in entries if e.is_file(follow_symlinks=False)]
        finally:
            os.close(fd)
        siblings = [f"{folder}/{name}" if folder else name for name in names]
        documents = []
        for path in related_descriptions(rel, siblings):
            with os.fdopen(self.guard.open_file(path), "rb") as f:
                text = f.read(MAX_DESCRIPTION_BYTES).decode("utf-8", errors="replace")
            if not find_injections(path, text):  # text addressing an AI names nothing
                documents.append((shown_name(path), text))
        return name_columns(width, documents)


_MAGIC = {
    b"PK\x03\x04": "a ZIP archive (or an Office/Jupyter container)",
    b"\x89HDF": "an HDF5 file",
    b"\x93NUMPY": "a NumPy array",
    b"SQLite format 3": "an SQLite database",
    b"\x7fELF": "an executable",
    b"%PDF": "a PDF",
    b"\x1f\x8b": "a gzip archive",
}


def _binary_message(rel: str, size: int, head: bytes) -> str:
    what = next((name for magic, name in _MAGIC.items() if head.startswith(magic)), "binary data")
    return f"{rel} is a binary file ({size} bytes, looks like {what}); its bytes are not shown."
