"""Shared test helpers."""

from __future__ import annotations

import os
import shutil

import pytest


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
