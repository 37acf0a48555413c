"""Shared test helpers."""

from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest


def end_process(process: subprocess.Popen[Any], timeout: float) -> None:
    """End a child process and reap it (no zombie, nothing left running): terminate, then kill if
    it is still there after `timeout` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def require_binary(name: str) -> str:
    """The path of an external tool; skip the test when it is missing locally, but fail under
    CI=true, where CI installs every tool the tests need."""
    found = shutil.which(name)
    if found is not None:
        return found
    message = f"required binary {name!r} is not installed"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI=true: CI must install it)")
    pytest.skip(message)


def require_module(dotted: str) -> None:
    """Skip the test unless module `dotted` is installed, found without importing it or its
    packages: for a test whose framework runs in a subprocess, `pytest.importorskip` imported the
    framework into the test process (about 1.2 s of CPU for LangChain's agents)."""
    head, *parts = dotted.split(".")
    spec = importlib.util.find_spec(head)
    for part in parts:
        if spec is None or spec.submodule_search_locations is None:
            break
        spec = importlib.machinery.PathFinder.find_spec(f"{spec.name}.{part}", list(spec.submodule_search_locations))
    if spec is None:
        pytest.skip(f"could not find module {dotted!r}")


def chromium_browser(args: list[str]) -> Iterator[Any]:
    """A Playwright browser on Debian's Chromium (never a downloaded one), closed afterwards.
    For a fixture: `yield from chromium_browser(ARGS)`."""
    executable = require_binary("chromium")
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=args)
        try:
            yield browser
        finally:
            browser.close()


def fresh_context(browser: Any) -> Iterator[Any]:
    """A new browser context (its own cookies, storage, cache and pages), closed afterwards: what a
    freshly launched browser gave each test, without a launch (about 0.9 s of CPU each). Its
    `new_page()` is the browser's. For a fixture: `yield from fresh_context(chromium)`."""
    context = browser.new_context()
    try:
        yield context
    finally:
        context.close()


@dataclass
class Files:
    """The adapter tests' two tools as plain functions (each kit wraps them its framework's way):
    `read_file`, which records every path it is asked for in `reads`, and `finish`."""

    reads: list[str] = field(default_factory=list)

    def functions(self) -> tuple[Callable[[str], str], Callable[[str], str]]:
        def read_file(path: str) -> str:
            """Read a text file.

            Args:
                path: the file name
            """
            self.reads.append(path)
            return f"contents of {path}"

        def finish(answer: str) -> str:
            """Give the final answer.

            Args:
                answer: the answer
            """
            return answer

        return read_file, finish


def close_default_loop() -> None:
    """Closes the event loop a framework's `run_sync` left as this thread's default. The OpenAI
    Agents SDK and PydanticAI (pydantic-graph) make one and keep it open on purpose, for their next
    call; once the next `asyncio.run` or async test replaces it, the orphaned loop was collected
    unclosed in some later test (ResourceWarning: an unclosed event loop and its two sockets)."""
    policy = asyncio.get_event_loop_policy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = policy.get_event_loop()
        except RuntimeError:
            return  # no default loop on this thread
    if not loop.is_running() and not loop.is_closed():
        loop.close()
        policy.set_event_loop(None)
