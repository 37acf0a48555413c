"""What `loopwarden app` costs a person in waiting, as ratios to `loopwarden --version` (the bare
command's start) measured in the same run, so load from other processes falls on all rows.

    python bench/bench_desktop_app.py [--repeat 3]

Needs Xvfb and xdotool (.ci/apt/app.txt) and the app extra; starts its own Xvfb. Rows, each the
median of N interleaved runs:
- `loopwarden --version`: the baseline (1.00x).
- launch to page ready: `loopwarden app` until the window's page shows its desktop controls.
- second launch: a second `loopwarden app` on the same run store, until it exits having brought the
  first window to the front (the hand-over happens before Qt is imported).
- close to exit: the close button until the process has exited (server stopped, Qt torn down).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from desktopkit import LOOPWARDEN, App, XWindows, app_env, run_cli, start_xvfb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    xvfb, display = start_xvfb()
    rows: dict[str, list[float]] = {
        "loopwarden --version": [],
        "launch to page ready": [],
        "second launch": [],
        "close to exit": [],
    }
    try:
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory() as folder:
                tmp = Path(folder)
                start = time.perf_counter()
                subprocess.run([str(LOOPWARDEN), "--version"], check=True, capture_output=True)
                rows["loopwarden --version"].append(time.perf_counter() - start)

                start = time.perf_counter()
                app = App(tmp, display, tmp / "state", name=f"bench{i}")
                rows["launch to page ready"].append(time.perf_counter() - start)
                try:
                    start = time.perf_counter()
                    second = run_cli(["app", "--state-dir", str(tmp / "state")], app_env(tmp, display), tmp)
                    rows["second launch"].append(time.perf_counter() - start)
                    assert second.returncode == 0, second.stderr
                    window = app.window_id()
                    start = time.perf_counter()
                    XWindows(display).close_window(window)
                    assert app.process.wait(300) == 0
                    rows["close to exit"].append(time.perf_counter() - start)
                finally:
                    app.kill()
    finally:
        xvfb.terminate()
        xvfb.wait(30)
    base = statistics.median(rows["loopwarden --version"])
    print(f"median of {args.repeat} runs (interleaved)")
    for name, times in rows.items():
        median = statistics.median(times)
        print(f"{name:24s} {median:7.2f} s  {median / base:6.1f}x")


if __name__ == "__main__":
    main()
