"""Figures through the real figure sandbox: CPU of the whole process tree and wall time.

    python bench/bench_figures.py [N] [--parallel K]

Draws N small figures (default 12), K at a time (default 2), through FigureSandbox with the
isolation this machine has, and prints wall seconds, CPU seconds of this process and every
process it started (getrusage of self + reaped children; the figure zygote, if any, is stopped
first so its children's CPU is counted), and CPU per figure. Set LOOPWARDEN_FIGURE_ZYGOTE=0 to
measure the per-figure spawn; compare the two as a ratio on the same machine and load.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

from loopwarden.report.sandbox import forkserver
from loopwarden.report.sandbox.isolation import probe_isolation
from loopwarden.report.sandbox.runner import FigureSandbox

CODE = "df = load('scan.csv')\nplt.plot(df['x'], df['y'])\nplt.title('scan {i}')\n"


def cpu() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


async def draw(box: FigureSandbox, count: int, parallel: int) -> int:
    gate = asyncio.Semaphore(parallel)

    async def one(i: int) -> bool:
        async with gate:
            outcome = await box.run(CODE.replace("{i}", str(i)), f"fig{i}")
            return outcome.ok

    return sum(await asyncio.gather(*(one(i) for i in range(count))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", nargs="?", type=int, default=12)
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp, "data"), Path(tmp, "out")
        data.mkdir()
        out.mkdir()
        (data / "scan.csv").write_text("x,y\n" + "".join(f"{i},{i * i}\n" for i in range(200)))
        box = FigureSandbox(data, out, probe_isolation())
        cpu0, wall0 = cpu(), time.perf_counter()
        ok = asyncio.run(draw(box, args.count, args.parallel))
        forkserver.stop()  # reaped: its CPU and its children's now count
        wall, used = time.perf_counter() - wall0, cpu() - cpu0
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    how = "one zygote" if box.uses_zygote else "a process a figure"
    print(f"layer {box.layer}, {how}: {ok}/{args.count} figures, {args.parallel} at a time, load {load}")
    print(f"wall {wall:.2f} s, CPU {used:.2f} s ({used / args.count:.3f} s a figure)")


if __name__ == "__main__":
    main()
