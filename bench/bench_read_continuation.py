"""What `read_file` costs on a 1 GB text file, as ratios against reading the file once
sequentially in the same run.

    python bench/bench_read_continuation.py [--mb 1024] [--line-bytes 100]

Builds the file in a temporary folder (deleted afterwards), reads it once in 1 MB blocks (the
baseline; the file was just written, so both run from the page cache), then through one
`FileReader`: the first read (which builds the line index), then continuations near the start,
in the middle and near the end. A continuation should cost a tiny fraction of the baseline and
read at most one checkpoint gap of bytes; it must never re-read the file from the start.
Also prints the process's RSS growth while the index was built, and the index's own size.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from loopwarden.report.folder.paths import PathGuard
from loopwarden.report.readers import FileReader, ReadOutcome

_BLOCK = 1 << 20


def build(path: Path, total_bytes: int, line_bytes: int) -> int:
    """A log-like file of numbered lines of `line_bytes` bytes (newline included); its line count."""
    pad = b"x" * max(line_bytes - 13, 0)
    lines_per_block = max(_BLOCK // line_bytes, 1)
    n = 0
    with path.open("wb") as f:
        while n * line_bytes < total_bytes:
            block = b"".join(b"%011d " % i + pad + b"\n" for i in range(n, n + lines_per_block))
            f.write(block)
            n += lines_per_block
    return n


def rss_bytes() -> int:
    """Current resident set size (not the peak), from /proc."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize()


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def sequential(path: Path) -> int:
    total = 0
    with path.open("rb", buffering=0) as f:
        while block := f.read(_BLOCK):
            total += len(block)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--line-bytes", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n_lines = build(root / "big.log", args.mb << 20, max(args.line_bytes, 14))
        size = (root / "big.log").stat().st_size
        t_seq = min(timed(lambda: sequential(root / "big.log"))[0] for _ in range(args.repeat))
        reader = FileReader(PathGuard(root))
        rss_before = rss_bytes()
        t_first, first = timed(lambda: reader.read("big.log"))
        rss_after = rss_bytes()
        index = reader.index_of("big.log")
        assert index is not None and index.total_lines == n_lines, (index and index.total_lines, n_lines)
        assert isinstance(first, ReadOutcome) and first.text.startswith("00000000000 ")
        print(f"file: {size / 2**20:.0f} MiB, {n_lines} lines of {args.line_bytes} bytes")
        print(f"sequential read (baseline): {t_seq:.3f} s")
        print(f"first read_file (builds the index): {t_first:.3f} s  ratio {t_first / t_seq:.2f}")
        print(
            f"index: {len(index.checkpoints)} checkpoints, {index.checkpoints.nbytes / 2**20:.2f} MiB; "
            f"RSS grew {(rss_after - rss_before) / 2**20:.1f} MiB while building it "
            f"(now {rss_after / 2**20:.0f} MiB)"
        )
        for label, offset in (
            ("start", 1_000),
            ("middle", n_lines // 2 + 77),
            ("end", n_lines - 30),
        ):
            before = index.bytes_read
            t_read = min(timed(lambda o=offset: reader.read("big.log", offset=o, limit=20))[0] for _ in range(5))
            outcome = reader.read("big.log", offset=offset, limit=20)
            read_once = (index.bytes_read - before) // 6
            assert outcome.text.startswith(f"{offset:011d} "), outcome.text[:40]
            assert reader.index_of("big.log") is index, "the index was rebuilt"
            print(
                f"continuation near the {label:<6} (line {offset}): {t_read * 1e3:.3f} ms  "
                f"ratio {t_read / t_seq:.6f}  bytes read {read_once}"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
