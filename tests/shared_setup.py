"""Which tests share an expensive fixture, for the xdist scheduler in tests/conftest.py (a module
of its own: tests/test_suite_groups.py checks it, and a conftest cannot be imported by name)."""

from __future__ import annotations

# Tests that share an expensive module or session fixture (a whole report run, xelatex, a desktop
# window, a browser): under xdist each group goes to one worker as one unit, so the fixture is built once.
# Handed out one test at a time, a module's tests landed on both workers and each built it
# (test_report_pdf.py: 38 s twice on a loaded machine).
# (xdist's own `loadgroup` cannot do this under pytest 9: it renames `item._nodeid`, gone.)
# The real-model tests (both files that use `llama_server`) are one group when they start first (the
# llama-cpp-python build is done): one worker runs them one after another against one server, about
# a minute on one core, while the other workers run the rest. Their requests are greedy, so a server
# answers them the same whatever it answered before. Spread over the workers, each worker started
# a server of its own (each loads the model: 1 s of CPU and 600 MB) and waited on it at the same time.
# While CI is still building llama-cpp-python they run last, one at a time: see conftest.py.
LLAMA_GROUP = "llama"
# The modules whose tests import the MCP SDK in the worker (about 1.3 s of CPU a process) are one
# unit too, so one worker imports it (test_readme's MCP block may on another), not every worker.
MCP_GROUP = "mcp"
SHARED_SETUP_GROUPS: dict[str, tuple[str, ...]] = {
    LLAMA_GROUP: ("e2e/test_llama_real_model.py", "e2e/test_proxy_llama.py"),
    MCP_GROUP: ("e2e/test_mcp_agent.py", "test_mcptools.py"),
} | {
    file: (file,)
    for file in (
        "e2e/test_report_pdf.py",
        "e2e/test_report_real_folder.py",
        "e2e/test_desktop_app.py",
        "test_desktop_focus.py",
        "e2e/test_proxy_fidelity.py",
        "e2e/test_durable_takeover.py",
        "e2e/test_server_bad_input.py",
        "e2e/test_web_page.py",
        "e2e/test_web_timeline.py",
        "e2e/test_web_approve_code.py",
        "test_server_sse.py",
        "test_report_tables_corpus.py",
        "test_report_attribute_names.py",
        "test_report_statistics.py",
        # OcrReader's engine, loaded once a process (~2.2 s of CPU): both OCR tests on one worker.
        "test_report_readers.py",
    )
}


def shared_setup_group(nodeid: str) -> str | None:
    """The SHARED_SETUP_GROUPS group of a test id (`tests/<file>::<name>`), if any."""
    relative = nodeid.split("::", 1)[0].removeprefix("tests/")
    return next((group for group, files in SHARED_SETUP_GROUPS.items() if relative in files), None)


def xdist_workers(cpus: int) -> int:
    """How many xdist workers `-n auto` starts on `cpus` usable CPUs: half as many again (2 -> 3).
    With one worker a CPU, 15-25% of both cores sat idle over the run (vmstat): a worker waits on a
    server coming up, on the real model's answer, on a timeout a test sits out; a spare worker fills
    that time. The README's test command with CI's set, quiet, main c6b6ec0 on this 2-core machine
    (3 December 2026, 17:12-17:24 UTC): -n 2 252.7 s, -n 3 221.9 s, the same 384-386 s of CPU."""
    return max(1, cpus) + (max(1, cpus) + 1) // 2
