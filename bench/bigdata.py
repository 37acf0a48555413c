"""Generators for the big-data benchmarks (nothing here is committed data: it is made on the fly).

- `big_csv(path, rows)`: a sensor log of `rows` rows (6.5 M rows is ~300 MB). The `load_pct`
  column stays within 0-2 for the first 200,000 rows and reaches its maximum, 65, near the end,
  so a profile of the first rows is visibly wrong. Its true statistics are returned.
- `many_files(root, n)`: a field campaign of `n` small files: per-station daily CSV logs
  (same columns), per-day JSON metadata, a few notes and a README describing the study, a
  symlink leading out of the folder, a binary blob and a file name that is not valid UTF-8.
"""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

README = """# Soil moisture field campaign 2024

## Background
Twelve stations along a hillslope logged soil moisture and temperature every hour.

## Goal
The goal is to measure how soil moisture responds to rain along the slope.

## Units
moisture_pct is volumetric water content in percent; soil_temp_c in degrees Celsius.
"""


def big_csv(path: Path, rows: int = 6_500_000) -> dict[str, float]:
    """Write the log; return the true count, min, max and mean of load_pct."""
    rng = random.Random(7)
    total, lo, hi = 0.0, math.inf, -math.inf
    peak_row = rows - rows // 20
    with path.open("w", encoding="utf-8") as f:
        f.write("timestamp_s,sensor,temperature_c,pressure_hpa,humidity_pct,status,load_pct\n")
        chunk: list[str] = []
        for i in range(rows):
            if i < 200_000:
                load = round(rng.random() * 2, 3)
            elif i == peak_row:
                load = 65.0
            else:
                load = round(rng.random() * 40 + 10 * math.sin(i / 50_000), 3)
            total += load
            lo, hi = min(lo, load), max(hi, load)
            temperature, humidity = 20 + 5 * math.sin(i / 3600), 40 + 20 * math.sin(i / 86_400)
            pressure = 1013 + rng.random()
            chunk.append(f"{i},S{i % 16:02d},{temperature:.4f},{pressure:.3f},{humidity:.3f},ok,{load}\n")
            if len(chunk) == 50_000:
                f.write("".join(chunk))
                chunk = []
        f.write("".join(chunk))
    return {"count": float(rows), "min": lo, "max": hi, "mean": total / rows}


def many_files(root: Path, n: int = 20_000) -> dict[str, int]:
    """Write the campaign; return how many files of each kind it holds."""
    rng = random.Random(11)
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(README, encoding="utf-8")
    (root / "notes").mkdir(exist_ok=True)
    (root / "notes" / "site_visit.md").write_text("# Site visit\n\nStation 7 was reburied on day 40.\n")
    (root / "blob.bin").write_bytes(bytes(range(256)) * 64)
    os.symlink("/etc/hostname", root / "outside_link.csv")
    bad = os.fsencode(root / "logs") + b"/caf\xe9_\xff.csv"
    (root / "logs").mkdir(exist_ok=True)
    with open(bad, "wb") as f:
        f.write(b"hour,moisture_pct\n0,31.5\n1,31.2\n")
    counts = {"csv": 1, "json": 0, "md": 2, "bin": 1, "symlink": 1}
    stations = 12
    days = max(1, (n - 6) // (stations + 1))
    for day in range(days):
        folder = root / "logs" / f"day_{day:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        meta = {"day": day, "rain_mm": round(rng.random() * 20, 1), "operator": "field team"}
        (folder / "meta.json").write_text(json.dumps(meta))
        counts["json"] += 1
        for station in range(stations):
            lines = ["hour,moisture_pct,soil_temp_c"]
            base = 25 + station + 5 * math.sin(day / 10)
            lines += [f"{h},{base + rng.random():.2f},{12 + 4 * math.sin(h / 24 * 6.28):.2f}" for h in range(24)]
            (folder / f"station_{station:02d}.csv").write_text("\n".join(lines) + "\n")
            counts["csv"] += 1
    return counts
