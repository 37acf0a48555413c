"""The per-figure cap on the staging folder: total bytes and number of entries. The child's
rlimit caps each file; this caps how many of them a figure may leave. The parent looks every
100 ms while the child runs and once after it ends; a breach kills the child and is reported as a
limit. Between two looks a child can add at most what it writes in 100 ms (each file under the
rlimit), so the folder can exceed the cap by that much before the kill, never more."""

from __future__ import annotations

import os
from pathlib import Path


class StagingWatch:
    def __init__(self, root: Path, max_bytes: int, max_files: int) -> None:
        self.root, self.max_bytes, self.max_files = str(root), max_bytes, max_files

    def check(self) -> str | None:
        """The breach found, as a phrase ("left 2001 files in its folder"), or None."""
        files, total, stack = 0, 0, [self.root]
        while stack:
            try:
                listing = os.scandir(stack.pop())
            except OSError:  # vanished or unreadable: nothing there to count
                continue
            with listing:
                for entry in listing:
                    files += 1
                    if files > self.max_files:
                        return f"left more than {self.max_files} files in its folder"
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
                    if total > self.max_bytes:
                        return f"wrote more than {self.max_bytes} bytes to its folder"
        return None
