"""Similar files in a big folder, grouped so exploration reads samples, not every file.

Files whose paths differ only in their numbers (`logs/day_0001/station_03.csv`,
`logs/day_0002/station_04.csv`) are one group, `logs/day_#/station_#.csv`. A group of
`GROUP_MIN` or more files is explored through `SAMPLES` of its members (first, middle, last);
the others stay in the coverage ledger as not read, with the group and its samples named, so
the report says exactly what was read. A folder of 20,000 daily logs is a handful of groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .scan import ScanResult

GROUP_MIN = 5
SAMPLES = 3
READ_ALL_FILES = 200
"""A folder of this many files or fewer is read file by file: no groups."""
_DIGITS = re.compile(r"\d+")


@dataclass
class FileGroup:
    pattern: str
    """The paths with every run of digits written as #."""
    kind: str
    paths: list[str] = field(default_factory=list)
    size: int = 0

    @property
    def grouped(self) -> bool:
        return len(self.paths) >= GROUP_MIN

    @property
    def samples(self) -> list[str]:
        if not self.grouped:
            return list(self.paths)
        n = len(self.paths)
        picks = sorted({0, n // 2, n - 1})[:SAMPLES]
        return [self.paths[i] for i in picks]

    def describe(self) -> str:
        if not self.grouped:
            return self.paths[0]
        return f"{self.pattern} ({len(self.paths)} files, e.g. {', '.join(self.samples)})"


def pattern_of(path: str) -> str:
    return _DIGITS.sub("#", path)


def group_files(scan: ScanResult) -> list[FileGroup]:
    """Groups in path order of their first member; singletons stay groups of one. A small
    folder (READ_ALL_FILES or fewer) is all singletons: every file is read."""
    if len(scan.files) <= READ_ALL_FILES:
        return [FileGroup(pattern=f.path, kind=f.kind, paths=[f.path], size=f.size) for f in scan.files]
    groups: dict[str, FileGroup] = {}
    for path, size, kind in zip(scan.files.paths(), _sizes(scan), _kinds(scan), strict=True):
        key = pattern_of(path)
        group = groups.get(key)
        if group is None:
            group = groups[key] = FileGroup(pattern=key, kind=kind)
        group.paths.append(path)
        group.size += size
    out: list[FileGroup] = []
    for group in groups.values():
        if group.grouped:
            out.append(group)
        else:  # too few to be a pattern: each file stands alone
            out += [FileGroup(pattern=p, kind=group.kind, paths=[p]) for p in group.paths]
    return sorted(out, key=lambda g: g.paths[0])


def sampled_paths(groups: list[FileGroup]) -> list[str]:
    return [p for g in groups for p in g.samples]


def _sizes(scan: ScanResult) -> list[int]:
    return [f.size for f in scan.files]


def _kinds(scan: ScanResult) -> list[str]:
    return [f.kind for f in scan.files]
