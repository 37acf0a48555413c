"""The coverage ledger: which files were read, how much of each, which were skipped and why.
Kept by the tools as they run (never by the model's say-so)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..record import CoverageEntry, CoverageLedger, CoverageStatus, FileGroupRecord
from .scan import ScanResult

if TYPE_CHECKING:
    from ..readers import ReadOutcome


class CoverageTracker:
    def __init__(self, scan: ScanResult) -> None:
        self._entries: dict[str, CoverageEntry] = {
            f.path: CoverageEntry(path=f.path, status="unread", total_chars=f.size) for f in scan.files
        }
        self._lines: dict[str, list[tuple[int, int]]] = {}

    def _entry(self, path: str) -> CoverageEntry:
        if path not in self._entries:
            self._entries[path] = CoverageEntry(path=path)
        return self._entries[path]

    def note_read(self, outcome: ReadOutcome) -> None:
        entry = self._entry(outcome.path)
        if outcome.mode in ("binary", "image"):
            reason = "binary file: not shown" if outcome.mode == "binary" else "image: use read_image"
            if entry.status == "unread":
                self._set(entry, "skipped", reason)
            return
        if outcome.mode == "table":
            entry.total_chars = outcome.total_chars
            partial = [t for t in outcome.tables if not t.complete]
            if partial:
                # Only the part the statistics cover counts, and the ledger says which part.
                entry.chars_read = outcome.read_bytes or outcome.chars
                self._set(entry, "partial", "; ".join(f"statistics of {t.part}" for t in partial))
                return
            entry.chars_read = outcome.total_chars or outcome.chars
            rows = ", ".join(t.part for t in outcome.tables)
            self._set(entry, "read", f"table profiled: {rows}" if rows else "table profiled")
            return
        spans = self._lines.setdefault(outcome.path, [])
        if (outcome.start, outcome.end) not in spans:
            spans.append((outcome.start, outcome.end))
            entry.chars_read += outcome.chars
        entry.total_chars = outcome.total_chars
        total = outcome.total_lines or 0
        covered = _covered(spans)
        if entry.status == "read":
            return
        if covered >= total:
            self._set(entry, "read", f"all {total} lines")
        else:
            self._set(entry, "partial", f"{covered} of {total} lines")

    def note_image(self, path: str, reader: str, chars: int) -> None:
        entry = self._entry(path)
        entry.chars_read += chars
        if reader == "none":
            self._set(entry, "partial", "no image reader configured: only the image size was read")
        else:
            self._set(entry, "read", f"read by {reader}")

    def note_groups(self, groups: list[FileGroupRecord]) -> None:
        """Members of a group that were not samples: not read, and the ledger says why."""
        from .groups import pattern_of

        by_pattern = {g.pattern: g for g in groups}
        for path, entry in self._entries.items():
            group = by_pattern.get(pattern_of(path)) if entry.status == "unread" and not entry.reason else None
            if group is not None:
                entry.reason = f"not read: one of {group.count} files like {group.pattern}; samples read instead"

    def note_scan_skips(self, scan: ScanResult) -> None:
        """What the scan left out for safety (a symlink out of the folder, a FIFO) is coverage too."""
        for skipped in scan.skipped:
            if skipped.reason == "hidden or VCS":
                continue
            self._set(self._entry(skipped.path), "skipped", skipped.reason)

    def opened(self, paths: Iterable[str]) -> int:
        """How many of `paths` a tool has read (in full, in part, or found binary)."""
        return sum(1 for path in paths if (entry := self._entries.get(path)) is not None and entry.status != "unread")

    def note_statistics_failed(self, path: str, error: str) -> None:
        """A table was read but its statistics failed: only its rows are known, and the ledger says so."""
        entry = self._entry(path)
        said = f"statistics could not be computed ({error}); only its rows are counted"
        self._set(entry, "partial", f"{entry.reason}; {said}" if entry.reason else said)

    def note_skip(self, path: str, reason: str) -> None:
        entry = self._entry(path)
        if entry.status in ("unread", "skipped"):
            self._set(entry, "skipped", reason)

    @staticmethod
    def _set(entry: CoverageEntry, status: CoverageStatus, reason: str) -> None:
        entry.status = status
        entry.reason = reason

    def ledger(self) -> CoverageLedger:
        return CoverageLedger(files=[e.model_copy() for e in sorted(self._entries.values(), key=lambda e: e.path)])


def _covered(spans: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for start, stop in sorted(spans):
        start = max(start, end)
        if stop > start:
            total += stop - start
            end = stop
    return total


_ORDER = {"skipped": 0, "partial": 1, "unread": 2, "read": 3}


def ledger_rows(
    ledger: CoverageLedger, groups: list[FileGroupRecord], limit: int = 60
) -> tuple[list[tuple[str, str, str, str]], int]:
    """The ledger condensed for a report: (file or group, status, amount read, note) rows.

    A group of similar files is one row (how many read, how many not). Files not read in full
    come first, so skipped, binary, partial and unreadable files are never cut off by the limit;
    the second value is how many rows were left out."""
    from .groups import pattern_of

    by_pattern = {g.pattern: g for g in groups}
    members: dict[str, list[CoverageEntry]] = {}
    singles: list[CoverageEntry] = []
    for entry in ledger.files:
        pattern = pattern_of(entry.path) if by_pattern else ""
        if pattern in by_pattern and entry.status in ("read", "unread"):
            members.setdefault(pattern, []).append(entry)
        else:
            singles.append(entry)
    rows: list[tuple[int, tuple[str, str, str, str]]] = []
    for entry in singles:
        amount = f"{entry.chars_read}/{entry.total_chars}" if entry.total_chars is not None else str(entry.chars_read)
        rows.append((_ORDER.get(entry.status, 3), (entry.path, entry.status, amount, entry.reason)))
    for pattern, entries in members.items():
        read = sum(1 for e in entries if e.status == "read")
        group = by_pattern[pattern]
        note = f"group of {group.count} similar files; samples: {', '.join(group.samples)}"
        rows.append((2, (pattern, "group", f"{read} of {len(entries)} files", note)))
    rows.sort(key=lambda r: r[0])
    return [r for _, r in rows[:limit]], max(0, len(rows) - limit)
