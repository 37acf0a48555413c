"""The adapter examples in examples/ run as a new user would run them, offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import require_module

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=180, cwd=EXAMPLES.parent
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_langchain_example_stops_the_stuck_model() -> None:
    require_module("langchain.agents.middleware")
    out = run_example("langchain_guard.py")
    assert "the file was read 1 time(s)" in out
    assert "stop_reason=repeated_call" in out


def test_the_openai_agents_example_stops_the_stuck_model() -> None:
    require_module("agents.models._run_context")
    out = run_example("openai_agents_guard.py")
    assert "the file was read 1 time(s)" in out
    assert "stop_reason=repeated_call" in out


def test_the_pydantic_ai_example_stops_the_stuck_model() -> None:
    require_module("pydantic_ai.capabilities")
    out = run_example("pydantic_ai_guard.py")
    assert "the file was read 1 time(s)" in out
    assert "stop_reason=repeated_call" in out
