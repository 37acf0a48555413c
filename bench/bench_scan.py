"""How long `scan_folder` takes on a folder of 100,000 files, against `find` on the same folder
(`find -printf '%s %p'`, which also stats every file), measured in the same run.

    python bench/bench_scan.py [--files 100000] [--repeat 3]

Prints the best of N for each and the ratio scan_folder / find (1.0 = as fast as find), in wall
time and in CPU time (the child's for find; for scan_folder the scanning process's plus its
worker's), for the scan as it runs by default (this process and one worker process walking the
tree together, `parallel.py`) and forced into one process (`parallel=False`, what
LOOPWARDEN_SCAN_PARALLEL=0 gives). All are run alternately, so load from other processes falls on
each; the CPU ratio is the steadier one on a shared machine, while only wall time shows what two
processes gain (their CPU adds up). A third ratio is the Python floor: a bare os.scandir + lstat loop that keeps
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
    """(wall, cpu) seconds of one call; cpu is this process's and its (waited) children's, or
    only the children's when `children`."""
    before, start = cpu_times(), time.perf_counter()
    fn()
    wall, after = time.perf_counter() - start, cpu_times()
    return wall, (after[1] - before[1]) + (0 if children else after[0] - before[0])


def cpu_times() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


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

        assert scan_folder(root, parallel=False) == scan, "one process and two must agree"

        finds, scans, singles, floors, builts = [], [], [], [], []
        for _ in range(args.repeat):
            finds.append(timed(run_find, children=True))
            scans.append(timed(lambda: scan_folder(root)))
            singles.append(timed(lambda: scan_folder(root, parallel=False)))
            floors.append(timed(lambda: python_floor(str(root))))
            builts.append(timed(lambda: scan_folder(root).files[-1]))
    t_find, c_find = best(finds)
    t_scan, c_scan = best(scans)
    t_single, c_single = best(singles)
    t_floor, c_floor = best(floors)
    t_built, c_built = best(builts)
    print(f"files: {args.files}  (best of {args.repeat}; load {os.getloadavg()[0]:.1f} at the end)")
    print(f"find -printf (baseline):    {t_find:.3f} s wall, {c_find:.3f} s cpu")
    print(f"scan_folder:                {t_scan:.3f} s wall, {c_scan:.3f} s cpu (both processes)")
    print(f"scan_folder, one process:   {t_single:.3f} s wall, {c_single:.3f} s cpu")
    print(f"ratio scan_folder / find: {t_scan / t_find:.2f} wall, {c_scan / c_find:.2f} cpu")
    print(f"ratio scan_folder, one process / find: {t_single / t_find:.2f} wall, {c_single / c_find:.2f} cpu")
    print(f"ratio python floor / find: {t_floor / t_find:.2f} wall, {c_floor / c_find:.2f} cpu")
    print(f"ratio scan_folder, one process / python floor: {t_single / t_floor:.2f} wall, {c_single / c_floor:.2f} cpu")
    print(f"ratio scan + every entry built / find: {t_built / t_find:.2f} wall, {c_built / c_find:.2f} cpu")


def best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return min(w for w, _ in runs), min(c for _, c in runs)


if __name__ == "__main__":
    main()
