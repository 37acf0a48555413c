"""How long `scan_folder` takes on a folder of 100,000 files, against `find` on the same folder
(`find -printf '%s %p'`, which also stats every file), measured in the same run.

    python bench/bench_scan.py [--files 100000] [--repeat 3]

Prints the best of N for each and the ratio scan_folder / find (1.0 = as fast as find).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from loopwarden.report.scan import scan_folder

EXTS = ("csv", "md", "png", "json", "pdf", "dat", "txt", "xlsx")


def build(root: Path, n_files: int, per_folder: int = 500) -> None:
    for i in range(n_files):
        folder = root / f"run{i // per_folder:04d}" / f"sub{(i // 50) % 10}"
        if i % 50 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:06d}.{EXTS[i % len(EXTS)]}").write_bytes(b"x" * (i % 97))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")


def best_of(repeat: int, fn: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    find = shutil.which("find")
    assert find is not None, "find is needed for the baseline"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        root.mkdir()
        build(root, args.files)
        scan = scan_folder(root)  # warm the page cache for both
        assert len(scan.files) == args.files, (len(scan.files), args.files)

        def run_find() -> None:
            subprocess.run([find, str(root), "-type", "f", "-printf", "%s %p\n"], check=True, capture_output=True)

        t_find = best_of(args.repeat, run_find)
        t_scan = best_of(args.repeat, lambda: scan_folder(root))
    print(f"files: {args.files}")
    print(f"find -printf (baseline): {t_find:.3f} s")
    print(f"scan_folder:             {t_scan:.3f} s")
    print(f"ratio scan_folder / find: {t_scan / t_find:.2f}")


if __name__ == "__main__":
    main()
