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
import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from helpers import close_default_loop
from shared_setup import LLAMA_GROUP, shared_setup_group, xdist_workers

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


# The longest tests (a minute or more on 2 busy cores: a real model on the CPU, a desktop window,
# a hundred durable runs), started first. pytest-xdist hands tests out in collection order, so a
# long test collected last would run alone at the end while the other workers sit idle. Slow tests
# outside SLOW_FILES (found with --durations) are listed here too.
LONGEST_FILES = (
    "e2e/test_llama_real_model.py",
    "e2e/test_durable_scale_out.py",
    "e2e/test_desktop_app.py",
    "e2e/test_proxy_llama.py",
    "test_report_approve_code.py",
    "test_report_sandbox_signals.py",
    "e2e/test_server_approve_code.py",
    "e2e/test_durable_*.py",
    "e2e/test_web_*.py",
    "e2e/test_mcp_agent.py",
)


LLAMA_NOW = "loopwarden_llama_now"


def llama_ready(config: pytest.Config) -> bool:
    """Whether the real model can start now: CI builds llama-cpp-python in the background
    (.ci/setup.d/llama.sh) and names the file it writes when done. Decided once, by the process
    that runs the session: every xdist worker must collect the same tests in the same order."""
    given = getattr(config, "workerinput", {}).get(LLAMA_NOW)
    if given is not None:
        return bool(given)
    if not hasattr(config, "_loopwarden_llama_now"):
        done = os.environ.get("LOOPWARDEN_LLAMA_BUILD_DONE")
        config._loopwarden_llama_now = done is None or Path(done).exists()  # type: ignore[attr-defined]
    return bool(config._loopwarden_llama_now)  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: more workers than CPUs (shared_setup.xdist_workers says how many and why).
    PYTEST_XDIST_AUTO_NUM_WORKERS and `-n logical` are left to xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.getoption("numprocesses") == "logical":
        return None
    return xdist_workers(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """For `-n` alone (`--dist load`): one test at a time, but a SHARED_SETUP_GROUPS group as one
    unit. xdist's `load` handed each worker a quarter of its share in one block at the start (so one
    worker got every long test) and never moves queued tests, so the suite ended with one worker
    running its queue while the other sat idle; this keeps at most three tests queued per worker,
    in collection order. Another --dist given on the command line is left to xdist."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    llama_first = llama_ready(config)

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = shared_setup_group(nodeid)
            if group == LLAMA_GROUP and not llama_first:
                # Last (CI still building llama-cpp-python): as one unit they would end the session on
                # one worker while the other sat idle, so one at a time there (a server per worker).
                return nodeid
            return nodeid if group is None else group

    config.option.loadscopereorder = False  # keep the collection order (start_order below)
    return SharedSetupScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """Bytecode is kept even under PYTHONDONTWRITEBYTECODE=1 (set in many containers and CI images):
    without it, every process the suite starts (each `loopwarden serve` and `worker`, MCP test
    server, report run and figure sandbox: hundreds) compiled the project's modules again, and each
    xdist worker rewrote every test module's asserts again (about 4 s of CPU a worker). Removed here,
    in the process that starts the xdist workers and every test's subprocess; .pyc files are written
    to __pycache__ (git-ignored) and used only while their source is unchanged."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput[LLAMA_NOW] = llama_ready(node.config)


def start_order(relative: str, uses_llama: bool, llama_now: bool) -> int:
    """0 for the longest files (in the order listed), then the other slow ones, then the rest. The
    real-model tests are the longest of all, but wait for their build: first when it is done,
    else last, so that no worker waits while others work."""
    if uses_llama:
        return -1 if llama_now else len(LONGEST_FILES) + 2
    for rank, pattern in enumerate(LONGEST_FILES):
        if fnmatch.fnmatch(relative, pattern):
            return rank
    if any(fnmatch.fnmatch(relative, pattern) for pattern in SLOW_FILES):
        return len(LONGEST_FILES)
    return len(LONGEST_FILES) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    order: dict[str, int] = {}
    llama_now = llama_ready(config)
    for item in items:
        relative = Path(str(item.path)).relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if any(fnmatch.fnmatch(relative, pattern) for pattern in SLOW_FILES):
            item.add_marker(pytest.mark.slow)
        uses_llama = "llama_server" in getattr(item, "fixturenames", ())
        order[item.nodeid] = start_order(relative, uses_llama, llama_now)
    items.sort(key=lambda item: order[item.nodeid])  # stable: a file's tests keep their order


def freeze_survivors() -> None:
    """Collect, then freeze what is still alive out of the collector's reach: later full
    collections walk only what was made since. Frozen objects are still freed by reference
    counting; only a cycle among them would outlive its use."""
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every module imported and every test collected: that lives to the end of the session."""
    freeze_survivors()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test module's last test (its module fixtures torn down), what it left alive (modules
    it imported, caches it filled) is frozen too. Without this, an xdist worker's 13-22 full
    collections walked 330,000-1,360,000 objects each: 2.6-5.1 s of its 34-49 s of CPU (the
    unit tests, `-n 2`; `gc.callbacks` timing each collection)."""
    yield
    if nextitem is None or nextitem.module is not item.module:  # type: ignore[attr-defined]
        freeze_survivors()


@pytest.fixture
def framework_loop_closed() -> Iterator[None]:
    """After the test, `helpers.close_default_loop()`: a framework's `run_sync` leaves its loop open."""
    yield
    close_default_loop()
