"""End-to-end fixtures. When the real-model tests (`llama_server`) run: see `start_order` in
tests/conftest.py (last while CI is still building llama-cpp-python in the background). The web
page modules' Chromium: one for all of them (tests/shared_setup.py WEB_GROUP keeps them on one
xdist worker), each test in a context of its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from helpers import chromium_browser, fresh_context
from llama_server import LlamaServer, start, stop

WEB_CHROMIUM_ARGS = [
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


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One Chromium for the web page modules' tests: a launch (with Playwright's driver) is about
    1.4 s of CPU, and each module launched its own."""
    yield from chromium_browser(WEB_CHROMIUM_ARGS)


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """Each test's own context in it: no page, cookie or stream of one test outlives it."""
    yield from fresh_context(chromium)
