"""Suite-wide settings.

Hypothesis: the suite runs on loaded 2-core machines (CI, a laptop building something else), where
a property test may be slow through no fault of its own. Both profiles therefore have no deadline,
do not fail on the `too_slow` health check (timing is for `bench/`, never for tests) and try a fixed
number of examples. `ci` (chosen when CI=true; or HYPOTHESIS_PROFILE=ci) also draws the same
examples every run and keeps no example database, so a CI result never depends on the seed.
Strategies do no I/O: files are written in the test body, from drawn values.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "loaded",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=100,
)
settings.register_profile("ci", settings.get_profile("loaded"), derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "loaded"))
