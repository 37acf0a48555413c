"""Suite-wide settings.

Hypothesis: the suite runs on loaded 2-core machines (CI, a laptop building something else), where
a property test may be slow through no fault of its own. Both profiles therefore have no deadline,
do not fail on the `too_slow` health check (timing is for `bench/`, never for tests) and try a fixed
number of examples. `ci` (chosen when CI=true; or HYPOTHESIS_PROFILE=ci) also draws the same
examples every run and keeps no example database, so a CI result never depends on the seed.
Strategies do no I/O: files are written in the test body, from drawn values.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "loaded",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=100,
)
settings.register_profile("ci", settings.get_profile("loaded"), derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "loaded"))

# Tests that start browsers, sandboxed children, xelatex, servers or whole offline explorations:
# marked `slow`, so `pytest -m "not slow"` is a quick loop while working (CI runs everything).
SLOW_FILES = (
    "e2e/*",
    "test_report_approve_code.py",
    "test_report_sandbox*.py",
    "test_report_latex.py",
    "test_report_compile.py",
    "test_report_offline*.py",
    "test_report_cli.py",
    "test_report_draft.py",
    "test_report_bib.py",
    "test_report_tex_containment.py",
    "test_report_pdf_descriptions.py",
    "test_report_statistics_hostile.py",
    "test_report_attribute_names.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        relative = Path(str(item.path)).relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if any(fnmatch.fnmatch(relative, pattern) for pattern in SLOW_FILES):
            item.add_marker(pytest.mark.slow)
