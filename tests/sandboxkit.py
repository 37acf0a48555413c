"""Shared fixtures of the figure-sandbox tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """An empty data folder and an empty output folder."""
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    return data, out
