"""How long `scan_folder` takes on a folder of 100,000 files, against `find` on the same folder
(`find -printf '%s %p'`, which also stats every file), measured in the same run.

    python bench/bench_scan.py [--files 100000] [--repeat 3]

Prints the best of N for each and the ratio scan_folder / find (1.0 = as fast as find), in wall
time and in CPU time (the scanning process's for scan_folder, the child's for find). The two are
run alternately, so load from other processes falls on both; the CPU ratio is the steadier one on
a shared machine. A third ratio is the Python floor: a bare os.scandir + lstat loop that keeps
nothing, making the same system calls as `find` (descriptor-relative lstat of the bare name),
i.e. what is left once the listing, sorting and models cost nothing. The listing's
`FileEntry` models are built on first use, not by the scan: the last ratio is a scan followed by
reading every entry, what a caller that walks the whole listing pays.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from loopwarden.report.folder.scan import scan_folder

EXTS = ("csv", "md", "png", "json", "pdf", "dat", "txt", "xlsx")


def build(root: Path, n_files: int, per_folder: int = 500) -> None:
    for i in range(n_files):
        folder = root / f"run{i // per_folder:04d}" / f"sub{(i // 50) % 10}"
        if i % 50 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:06d}.{EXTS[i % len(EXTS)]}").write_bytes(b"x" * (i % 97))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref")


def timed(fn: Callable[[], object], children: bool = False) -> tuple[float, float]:
    """(wall, cpu) seconds of one call; cpu is the children's when `children`."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    before, start = resource.getrusage(who), time.perf_counter()
    fn()
    wall, after = time.perf_counter() - start, resource.getrusage(who)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def python_floor(root: str) -> int:
    """The least any Python scan does: the syscalls `find` makes (each folder opened, listed with
    os.scandir on its descriptor, one lstat per file on the bare name), nothing kept."""
    total, stack = 0, [root]
    while stack:
        folder = stack.pop()
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with os.scandir(fd) as listing:
                for entry in listing:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(os.path.join(folder, entry.name))
                    else:
                        total += entry.stat(follow_symlinks=False).st_size
        finally:
            os.close(fd)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
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

        finds, scans, floors, builts = [], [], [], []
        for _ in range(args.repeat):
            finds.append(timed(run_find, children=True))
            scans.append(timed(lambda: scan_folder(root)))
            floors.append(timed(lambda: python_floor(str(root))))
            builts.append(timed(lambda: scan_folder(root).files[-1]))
    t_find, c_find = min(w for w, _ in finds), min(c for _, c in finds)
    t_scan, c_scan = min(w for w, _ in scans), min(c for _, c in scans)
    t_floor, c_floor = min(w for w, _ in floors), min(c for _, c in floors)
    t_built, c_built = min(w for w, _ in builts), min(c for _, c in builts)
    print(f"files: {args.files}  (best of {args.repeat})")
    print(f"find -printf (baseline): {t_find:.3f} s wall, {c_find:.3f} s cpu")
    print(f"scan_folder:             {t_scan:.3f} s wall, {c_scan:.3f} s cpu")
    print(f"ratio scan_folder / find: {t_scan / t_find:.2f} wall, {c_scan / c_find:.2f} cpu")
    print(f"ratio python floor / find: {t_floor / t_find:.2f} wall, {c_floor / c_find:.2f} cpu")
    print(f"ratio scan_folder / python floor: {t_scan / t_floor:.2f} wall, {c_scan / c_floor:.2f} cpu")
    print(f"ratio scan + every entry built / find: {t_built / t_find:.2f} wall, {c_built / c_find:.2f} cpu")


if __name__ == "__main__":
    main()
