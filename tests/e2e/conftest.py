"""End-to-end fixtures. The real-model tests (`llama_server`) run last: CI may still be building
llama-cpp-python in the background while the rest of the suite runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llama_server import LlamaServer, start, stop


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: "llama_server" in getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server, process = start(tmp_path_factory.mktemp("llama"))
    try:
        yield server
    finally:
        stop(process)
