"""The runnable example the README points at works as a new user would run it."""

from __future__ import annotations

import subprocess
import sys


def test_collapse_example_runs_and_reports_both_outcomes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden.examples.collapse"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "collapse stopped: True; healthy run finished: True" in done.stdout
    assert "stopped" in done.stdout and "repeated_call" in done.stdout
