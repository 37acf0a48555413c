"""The coverage ledger: which files were read, how much of each, which were skipped and why.
Kept by the tools as they run (never by the model's say-so)."""

from __future__ import annotations

from .readers import ReadOutcome
from .record import CoverageEntry, CoverageLedger, CoverageStatus
from .scan import ScanResult


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
