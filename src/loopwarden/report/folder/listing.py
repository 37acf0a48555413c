"""The scan's listing: sorted columns, with a `FileEntry` model per file built only when used.

A scan of 100k files spent longer building 100k pydantic models than listing the folder, and
most callers only need the counts, the length or the first few hundred paths. `FileList` keeps
what the walk found as three parallel columns (paths, sizes, extensions; kinds follow from the
extensions) and behaves as a read-only `list[FileEntry]` everywhere it is read: indexing,
slicing, iteration, equality with lists and with other listings, pydantic validation and dumps
(the dump is the one a `list[FileEntry]` field gives, byte for byte).

The first element access builds every entry at once and keeps them; from then on the entries
are the listing (so an entry changed in place stays changed, as in a list) and the columns are
dropped. `paths()`, `len()` and equality between unbuilt listings read the columns only.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, overload

from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic_core import core_schema

from .walk import extensions

__all__ = ["FileEntry", "FileList", "Kind", "collector_paused", "extensions"]

Kind = Literal["documents", "images", "data", "other"]


class FileEntry(BaseModel):
    path: str
    """POSIX path relative to the root."""
    size: int
    kind: Kind
    ext: str
    """Lower-case extension without the dot; "" when there is none."""


class FileList(Sequence[FileEntry]):
    __slots__ = ("_entries", "_exts", "_kinds", "_paths", "_sizes")

    def __init__(
        self,
        paths: list[str] | None = None,
        sizes: list[int] | None = None,
        exts: list[str] | None = None,
        kinds: list[Kind] | None = None,
    ) -> None:
        """Parallel columns, already sorted by path; `kinds[i]` must be the kind of `exts[i]`."""
        self._paths = paths or []
        self._sizes = sizes or []
        self._exts = exts or []
        self._kinds = kinds or []
        if not len(self._paths) == len(self._sizes) == len(self._exts) == len(self._kinds):
            raise ValueError("the columns of a listing must have one value per file")
        self._entries: list[FileEntry] | None = None

    @classmethod
    def of(cls, entries: Iterable[FileEntry]) -> FileList:
        """A listing of entries that already exist (validated ones): they are kept as they are."""
        listing = cls()
        listing._entries = list(entries)
        return listing

    def entries(self) -> list[FileEntry]:
        """Every entry, built on the first call; the same list (and objects) on every later one."""
        entries = self._entries
        if entries is None:
            # Two threads may both build; the first to finish wins and both return its list, so
            # every caller sees the same entry objects.
            with collector_paused():
                built = list(map(_entry, self._paths, self._sizes, self._kinds, self._exts))
            if self._entries is None:
                self._entries = built
                # The entries hold the same strings; only the columns' own arrays are freed.
                self._paths, self._sizes, self._exts, self._kinds = [], [], [], []
            entries = self._entries
        return entries

    def paths(self, limit: int | None = None) -> list[str]:
        """The first `limit` paths (all by default), without building any entry."""
        if self._entries is None:
            return self._paths[:limit]
        return [entry.path for entry in self._entries[:limit]]

    def __len__(self) -> int:
        return len(self._paths) if self._entries is None else len(self._entries)

    @overload
    def __getitem__(self, index: int) -> FileEntry: ...
    @overload
    def __getitem__(self, index: slice) -> list[FileEntry]: ...
    def __getitem__(self, index: int | slice) -> FileEntry | list[FileEntry]:
        return self.entries()[index]

    def __iter__(self) -> Iterator[FileEntry]:
        return iter(self.entries())

    def __reversed__(self) -> Iterator[FileEntry]:
        return reversed(self.entries())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FileList):
            if self._entries is None and other._entries is None:
                # Unbuilt listings are equal when their columns are: entries are built from them.
                return (self._paths, self._sizes, self._exts, self._kinds) == (
                    other._paths,
                    other._sizes,
                    other._exts,
                    other._kinds,
                )
            return self.entries() == other.entries()
        if isinstance(other, list):
            return self.entries() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable entries, like a list

    def __repr__(self) -> str:
        return repr(self.entries())

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # Validated and dumped as the `list[FileEntry]` it stands for: same input, same JSON
        # schema, same dumps; a FileList given as input is kept as it is.
        as_list = handler.generate_schema(list[FileEntry])
        return core_schema.no_info_wrap_validator_function(
            _validate,
            as_list,
            serialization=core_schema.plain_serializer_function_ser_schema(_as_list, return_schema=as_list),
        )


def _entry(path: str, size: int, kind: Kind, ext: str) -> FileEntry:
    """What FileEntry.model_construct(path=..., size=..., kind=..., ext=...) builds, 6x faster.

    model_construct loops over the fields in Python, and pydantic validation of the listing costs
    more than listing the folder; the values here are typed and complete, so neither is needed.
    The fields-set is shared: it already holds every field name, and pydantic only ever adds
    field names to it (model_copy copies it first), so sharing changes nothing observable but
    saves one set per file. tests/test_report_scan.py checks these entries equal, dump and copy
    like validated ones.
    """
    entry = _new(FileEntry)
    _set(entry, "__dict__", {"path": path, "size": size, "kind": kind, "ext": ext})
    _set(entry, "__pydantic_fields_set__", _ALL_FIELDS)
    _set(entry, "__pydantic_extra__", None)
    _set(entry, "__pydantic_private__", None)
    return entry


_new = object.__new__
_set = object.__setattr__
_ALL_FIELDS = set(FileEntry.model_fields)


def _validate(value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> FileList:
    if isinstance(value, FileList):
        return value
    return FileList.of(handler(value))


def _as_list(value: Sequence[FileEntry]) -> list[FileEntry]:
    # A plain list can end up in the field by assignment (no validation on assignment).
    return value.entries() if isinstance(value, FileList) else list(value)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while the listing is built.

    The scan's walk and the building of a listing's entries allocate tracked objects per file and
    no cycles, so collecting finds nothing, yet 100k new objects set off full collections of the
    whole heap: on the 100k-file benchmark they were a fifth of the scan, and 45% of building
    every entry. The pause is process-wide (other threads go without cyclic collection for the
    length of the pause; reference counting still frees everything else), and collection is
    re-enabled only if it was on, so a caller that turned it off keeps it off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
