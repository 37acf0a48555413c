"""The routing example (seed-002) runs as a new user would run it."""

from __future__ import annotations

import os
import subprocess
import sys


def test_metric_trend_example_ends_on_the_checklist() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden.examples.metric_trend"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},  # one trace line per line
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "routed: record_and_trend" in out
    assert "show_ui_card did not run: not_allowed" in out
    assert "fixed to '14d' by the request (got '30d')" in out
    assert "period='14d' (proposed '2w')" in out
    assert "finished: completed (checklist_complete), 2 executions" in out
