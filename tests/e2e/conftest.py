"""End-to-end fixtures. When the real-model tests (`llama_server`) run: see `start_order` in
tests/conftest.py (last while CI is still building llama-cpp-python in the background)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llama_server import LlamaServer, start, stop


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server, process = start(tmp_path_factory.mktemp("llama"))
    try:
        yield server
    finally:
        stop(process)
