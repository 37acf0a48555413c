"""End-to-end fixtures. When the real-model tests (`llama_server`) run: see `start_order` in
tests/conftest.py (last while CI is still building llama-cpp-python in the background)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from helpers import chromium_browser, fresh_context
from llama_server import LlamaServer, start, stop

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server, process = start(tmp_path_factory.mktemp("llama"))
    try:
        yield server
    finally:
        stop(process)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Chromium for a module's tests (tests/shared_setup.py keeps each such module on one xdist
    worker). Not one for the session: Playwright's sync API leaves its event loop set as running
    while it is open, so no later asyncio test on the worker could run."""
    yield from chromium_browser(CHROMIUM_ARGS)


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """Each test's own context in it: no page, cookie or stream of one test outlives it."""
    yield from fresh_context(chromium)
