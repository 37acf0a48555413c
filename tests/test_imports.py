"""`import loopwarden` (the runtime) stays light: the heavy dependencies load where they are used.
Checked in a fresh interpreter, so what other tests imported does not count."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "numpy",
    "bm25s",
    "pandas",
    "matplotlib",
    "openai",
    "fastapi",
    "starlette",
    "httpx",
    "rich",
    "uvicorn",
    "dbos",
    "psycopg",
    "duckdb",
)


def modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_import_loopwarden_loads_no_heavy_dependency() -> None:
    loaded = top_level(modules_after("import loopwarden\nfrom loopwarden import Agent, ToolSearch, tool"))
    assert "loopwarden" in loaded and "pydantic" in loaded  # the probe did import the runtime
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_import_loopwarden_alone_loads_no_runtime_module() -> None:
    loaded = modules_after("import loopwarden")
    assert "loopwarden" in loaded and "loopwarden.agent" not in loaded and "pydantic" not in loaded


def test_an_agent_that_does_not_trace_loads_no_run_store() -> None:
    loaded = modules_after("from loopwarden import Agent, tool")
    lazy = {"sqlite3", "loopwarden.trace.store", "loopwarden.trace.exchanges", "loopwarden.models.markup"}
    assert "loopwarden.agent" in loaded and not lazy & loaded, sorted(lazy & loaded)


def test_tool_search_loads_bm25s_when_a_run_first_searches() -> None:
    code = (
        "from loopwarden import ToolRegistry, tool\n"
        "from loopwarden.tools.search import ToolIndex\n"
        "def read_file(path: str) -> str:\n    'Read a file.'\n    return path\n"
        "index = ToolIndex(ToolRegistry([read_file]))\n"
        "assert [t.name for t, _ in index.search('read a file')] == ['read_file']"
    )
    assert "bm25s" in top_level(modules_after(code))


def test_the_command_table_loads_no_command_module() -> None:
    loaded = modules_after("from loopwarden.cli import build_app\nbuild_app()")
    assert top_level(loaded).isdisjoint(HEAVY), sorted(top_level(loaded) & set(HEAVY))
    parts = {"loopwarden.report", "loopwarden.server", "loopwarden.eval", "loopwarden.examples", "loopwarden.desktop"}
    assert "loopwarden.cli" in loaded and not parts & loaded, sorted(parts & loaded)
