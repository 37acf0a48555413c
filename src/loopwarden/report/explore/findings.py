"""Findings computed from the data itself: what was measured, ranges, trends, correlations and
peaks. Used by the offline explorer (its whole analysis) and when an exploration is cut off
(the record is then written from what had been read)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from ..readers.tables import correlations
from ..record import FileGroupRecord, TableProfile


def numeric_columns(frame: pd.DataFrame) -> list[str]:
    return [str(c) for c in frame.select_dtypes("number").columns if frame[c].nunique() > 1]


def independent_column(frame: pd.DataFrame) -> str | None:
    """The column the others were measured against: the first numeric column that is monotonic
    (a position, time, setting), else the first numeric column."""
    columns = numeric_columns(frame)
    for column in columns:
        series = frame[column].dropna()
        if series.is_monotonic_increasing or series.is_monotonic_decreasing:
            return column
    return columns[0] if columns else None


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def table_findings(path: str, frame: pd.DataFrame, profile: TableProfile | None = None) -> list[str]:
    """Findings of one table. Ranges and means come from `profile` (every row of the file, or
    the part it names) when given; trends and peaks from `frame`, which may be the first rows."""
    columns = numeric_columns(frame)
    rows = profile.rows if profile is not None else len(frame)
    found = [f"{path}: {rows} rows; columns {', '.join(str(c) for c in frame.columns)}."]
    if profile is not None and not profile.complete:
        found[0] = f"{path}: statistics of {profile.part}; columns {', '.join(str(c) for c in frame.columns)}."
    if not columns:
        return found
    x = independent_column(frame)
    over = f" over {profile.part}" if profile is not None and not profile.complete else ""
    for column in columns:
        stats = profile.numeric_summary.get(column) if profile is not None else None
        if stats and {"min", "max", "mean"} <= stats.keys():
            lo, hi, mean = stats["min"], stats["max"], stats["mean"]
        else:
            series = frame[column].dropna()
            lo, hi, mean = float(series.min()), float(series.max()), float(series.mean())
        found.append(f"{path}: {column} ranges from {_fmt(lo)} to {_fmt(hi)} (mean {_fmt(mean)}){over}.")
    if x is None:
        return found
    sample = profile is not None and (len(frame) < profile.rows or not profile.complete)
    for column in columns:
        if column == x:
            continue
        for finding in _against(path, frame, x, column):
            found.append(finding[:-1] + f" (in the first {len(frame)} rows)." if sample else finding)
    return found


def _against(path: str, frame: pd.DataFrame, x: str, y: str) -> list[str]:
    pair = frame[[x, y]].dropna()
    if len(pair) < 3:
        return []
    xs, ys = pair[x].to_numpy(dtype=float), pair[y].to_numpy(dtype=float)
    found = []
    r = float(np.corrcoef(xs, ys)[0, 1]) if np.std(xs) > 0 and np.std(ys) > 0 else float("nan")
    peak = int(np.argmax(ys))
    interior = 0 < peak < len(ys) - 1
    if interior and ys[peak] > ys[0] and ys[peak] > ys[-1]:
        found.append(f"{path}: {y} peaks at {_fmt(ys[peak])} at {x} = {_fmt(xs[peak])}.")
        found.extend(_half_maximum(path, xs, ys, peak, x, y))
    noise = _noise(ys)
    if noise is not None:
        found.append(
            f"{path}: point-to-point noise in {y} is about {_fmt(noise)} (robust estimate from fourth differences), "
            f"a measurement uncertainty of roughly ±{_fmt(noise)} per reading."
        )
    if math.isfinite(r) and abs(r) >= 0.9:
        slope = float(np.polyfit(xs, ys, 1)[0])
        direction = "rises" if slope > 0 else "falls"
        found.append(f"{path}: {y} {direction} linearly with {x} (slope {_fmt(slope)} per unit, r = {r:+.3f}).")
    elif math.isfinite(r) and not interior:
        found.append(f"{path}: {y} versus {x}: correlation r = {r:+.3f}.")
    return found


def _half_maximum(path: str, xs: np.ndarray, ys: np.ndarray, peak: int, x: str, y: str) -> list[str]:
    """Where a peaked profile falls to half its peak on each side (linear interpolation)."""
    half = ys[peak] / 2
    left = next((i for i in range(peak, 0, -1) if ys[i - 1] <= half < ys[i]), None)
    right = next((i for i in range(peak, len(ys) - 1) if ys[i + 1] <= half < ys[i]), None)
    if left is None or right is None:
        return []
    x_left = xs[left - 1] + (half - ys[left - 1]) * (xs[left] - xs[left - 1]) / (ys[left] - ys[left - 1])
    x_right = xs[right] + (ys[right] - half) * (xs[right + 1] - xs[right]) / (ys[right] - ys[right + 1])
    ends = f"{100 * ys[0] / ys[peak]:.0f}% and {100 * ys[-1] / ys[peak]:.0f}%"
    return [
        f"{path}: {y} falls to half its peak ({_fmt(half)}) at {x} = {_fmt(x_left)} and {_fmt(x_right)} "
        f"(full width at half maximum {_fmt(x_right - x_left)}); at the ends of the {x} range it is {ends} of the peak."
    ]


def _noise(ys: np.ndarray) -> float | None:
    """Noise per reading from fourth differences, which cancel a smooth profile's trend and
    curvature (var of a 4th difference of white noise = 70 sigma^2); MAD for robustness."""
    if len(ys) < 10:
        return None
    fourth = np.diff(ys, 4)
    mad = float(np.median(np.abs(fourth - np.median(fourth))))
    noise = 1.4826 * mad / math.sqrt(70)
    return noise if noise > 0 else None


def cross_table_findings(frames: dict[str, pd.DataFrame]) -> list[str]:
    """Tables with the same columns are runs of one measurement: compare their peaks."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for path, frame in frames.items():
        groups.setdefault(tuple(str(c) for c in frame.columns), []).append(path)
    found = []
    for columns, paths in groups.items():
        frame0 = frames[paths[0]]
        x = independent_column(frame0)
        if len(paths) < 2 or x is None:
            continue
        for y in numeric_columns(frame0):
            if y == x:
                continue
            maxima = {p: float(frames[p][y].max()) for p in sorted(paths, key=_natural)}
            if len(set(maxima.values())) > 1:
                listing = ", ".join(f"{_label(p)}: {_fmt(v)}" for p, v in maxima.items())
                found.append(
                    f"Across {len(paths)} runs with columns {', '.join(columns)}, the maximum {y} is {listing}."
                )
                found.extend(_scaling(y, maxima))
    return found


def group_findings(groups: list[FileGroupRecord], frames: dict[str, pd.DataFrame]) -> list[str]:
    """What a group of similar files is, from its samples: how many, which were read, columns."""
    found = []
    for group in groups:
        read = [p for p in group.samples if p in frames]
        text = f"{group.pattern}: {group.count} files with the same name pattern; {len(group.samples)} read as samples"
        if read:
            shapes = {tuple(str(c) for c in frames[p].columns) for p in read}
            if len(shapes) == 1:
                text += f", each with columns {', '.join(next(iter(shapes)))}"
            else:
                text += f", whose columns differ ({len(shapes)} different column sets)"
        found.append(text + ".")
    return found


def strongest_correlations(frames: dict[str, pd.DataFrame]) -> list[str]:
    found = []
    for path, frame in frames.items():
        for a, b, r in correlations(frame, top=1):
            found.append(f"{path}: strongest correlation {a} ~ {b}, r = {r:+.3f}.")
    return found


_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)")


def _natural(path: str) -> tuple[str, float]:
    match = _NUMBER.search(_label(path))
    return (_NUMBER.sub("#", _label(path)), float(match.group(1)) if match else 0.0)


def _scaling(y: str, maxima: dict[str, float]) -> list[str]:
    """When run names carry a setting (scan_500mA, scan_1000mA), how the maxima scale with it."""
    settings = [_NUMBER.search(_label(p)) for p in maxima]
    if len(maxima) < 3 or any(s is None for s in settings):
        return []
    xs = np.array([float(s.group(1)) for s in settings if s])
    ys = np.array(list(maxima.values()))
    if len(set(xs.tolist())) < len(xs) or np.std(ys) == 0:
        return []
    r = float(np.corrcoef(xs, ys)[0, 1])
    unit = next((s.group(2) for s in settings if s and s.group(2)), "")
    slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1))
    if abs(r) < 0.98:
        return [f"The maximum {y} against the run setting ({unit or 'number in the file name'}): r = {r:+.4f}."]
    return [
        f"The maximum {y} scales linearly with the run setting in the file names ({unit or 'value'}): "
        f"{_fmt(slope)} per {unit or 'unit'}, intercept {_fmt(intercept)}, r = {r:+.4f}."
    ]


def _label(path: str) -> str:
    return path.rsplit("/", 1)[-1]


_HEADING = re.compile(r"^\s*#+\s*(.+?)\s*#*\s*$|^\\(?:title|section)\{(.+?)\}")


def title_of(text: str) -> str | None:
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            return (match.group(1) or match.group(2)).strip()
    return None


def section(text: str, *keywords: str) -> list[str]:
    """The lines under the first heading that mentions one of the keywords."""
    lines = text.splitlines()
    out: list[str] = []
    inside = False
    for line in lines:
        heading = _HEADING.match(line)
        if heading:
            if inside:
                break
            inside = any(k in line.lower() for k in keywords)
            continue
        if inside and line.strip():
            out.append(line.strip().lstrip("-*0123456789. ").strip())
    return [o for o in out if o]


def sentence_with(text: str, *keywords: str) -> str | None:
    """The paragraph (joined lines, up to a blank line or heading) that first mentions a keyword."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip() or _HEADING.match(line):
            if current:
                paragraphs.append(" ".join(current))
            current = []
            continue
        current.append(line.strip().lstrip("-* ").strip())
    if current:
        paragraphs.append(" ".join(current))
    for paragraph in paragraphs:
        lowered = paragraph.lower()
        if len(paragraph) > 15 and any(lowered.startswith(k) or f" {k}" in lowered for k in keywords):
            return paragraph
    return None
