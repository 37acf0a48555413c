"""The suite's xdist groups (tests/shared_setup.py, used by tests/conftest.py): every test file with a fixture
built once per module or session is in one, so under `-n` its tests go to one worker and the
fixture is built once; a file missing from them would build it on each worker again."""

from __future__ import annotations

import re
from pathlib import Path

from shared_setup import LLAMA_GROUP, MCP_GROUP, SHARED_SETUP_GROUPS, shared_setup_group, xdist_workers

TESTS = Path(__file__).resolve().parent
SHARED_SCOPE = re.compile(r"@pytest\.fixture\(\s*scope=[\"'](module|package|session)[\"']")


def test_every_file_with_a_module_or_session_fixture_is_grouped() -> None:
    grouped = {file for files in SHARED_SETUP_GROUPS.values() for file in files}
    owners = {
        path.relative_to(TESTS).as_posix()
        for path in TESTS.rglob("test_*.py")
        if SHARED_SCOPE.search(path.read_text(encoding="utf-8"))
    }
    assert owners, "the pattern finds the module fixtures"
    assert owners <= grouped, sorted(owners - grouped)
    users = {
        path.relative_to(TESTS).as_posix() for path in TESTS.rglob("test_*.py") if "llama_server" in path.read_text()
    }
    assert users - {Path(__file__).name} == {"e2e/test_llama_real_model.py", "e2e/test_proxy_llama.py"}
    # every real-model test in one group, so the session starts one llama server: see shared_setup.py
    assert set(SHARED_SETUP_GROUPS[LLAMA_GROUP]) == users - {Path(__file__).name}
    # e2e/conftest.py's Chromium is built once a module: its users are grouped as well
    on_chromium = {
        path.relative_to(TESTS).as_posix()
        for path in (TESTS / "e2e").glob("test_*.py")
        if re.search(r"\bbrowser: Any\b", text := path.read_text(encoding="utf-8")) and "def browser(" not in text
    }
    assert len(on_chromium) == 3 and on_chromium <= grouped, sorted(on_chromium - grouped)


def test_a_test_id_maps_to_its_files_group_or_none() -> None:
    assert shared_setup_group("tests/e2e/test_report_pdf.py::test_x") == "e2e/test_report_pdf.py"
    assert shared_setup_group("tests/e2e/test_report_pdf.py::test_x[a::b]") == "e2e/test_report_pdf.py"
    assert shared_setup_group("tests/e2e/test_proxy_llama.py::test_y") == LLAMA_GROUP
    assert shared_setup_group("tests/e2e/test_llama_real_model.py::test_z") == LLAMA_GROUP
    assert shared_setup_group("tests/test_report_statistics.py::test_w") == "test_report_statistics.py"
    assert shared_setup_group("tests/test_mcptools.py::test_u") == MCP_GROUP  # the SDK imported on one worker
    assert shared_setup_group("tests/test_events.py::test_v") is None
    assert all(files for files in SHARED_SETUP_GROUPS.values())
    for files in SHARED_SETUP_GROUPS.values():
        assert all((TESTS / file).is_file() for file in files), files


def test_auto_starts_half_as_many_workers_again_as_there_are_cpus() -> None:
    assert [xdist_workers(cpus) for cpus in (0, 1, 2, 3, 4, 8)] == [2, 2, 3, 5, 6, 12]
