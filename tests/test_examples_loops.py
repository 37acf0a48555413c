"""The loop-detector example runs as a new user would run it, each case ending as it says."""

from __future__ import annotations

import os
import subprocess
import sys


def test_loops_example_shows_each_detector_and_a_healthy_run() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden.examples.loops"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},  # wide enough that rich does not wrap the stop reasons
    )
    assert done.returncode == 0, done.stderr
    assert "every case ended as expected: True" in done.stdout
    for reason in ("cycle", "error_loop", "no_progress", "repetition", "monologue", "final_answer"):
        assert reason in done.stdout
