"""`loopwarden app` as a person meets it: a real process with a real window under Xvfb (started by
the test on a display it picks itself), the example folder picked in the native folder dialog, the
offline report run to the end, the finished state read from the window's own DOM, the PDF opened
and its folder shown through the system's opener, a second launch bringing the first window to the
front, the close button ending the process tree, and the run still there at the next launch.
Screenshots of the start and the end are kept in the test's temporary folder (`screens/`)."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktopkit import (
    App,
    XWindows,
    app_env,
    copy_example,
    iter_lines,
    run_cli,
    screenshot,
    wait_for,
    xdotool,
    xvfb_display,
)
from loopwarden.trace.store import RunStore


def _webengine_installed() -> bool:
    """Looked up, not imported: importing PySide6 in a pytest worker installs shiboken's import hook,
    which wraps every later import of every test in that worker (and reprs `__main__` on the way)."""
    spec = importlib.util.find_spec("PySide6")
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    return any(any(Path(folder).glob("QtWebEngineWidgets.*")) for folder in folders)


if not _webengine_installed():
    pytest.skip("needs the app extra (PySide6 with QtWebEngineWidgets)", allow_module_level=True)

RUN_S = 900.0  # the offline report with xelatex on a loaded 2-core machine
FINAL = (
    "['completed', 'degraded', 'failed', 'cancelled', 'interrupted']"
    ".includes(document.getElementById('run-status').textContent)"
)


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    yield from xvfb_display()


@pytest.fixture(scope="module")
def window(tmp_path_factory: pytest.TempPathFactory, display: str) -> Iterator[App]:
    """One window for the three tests that need a window, not a launch of their own (a second
    window beside it; a folder that vanishes mid-run; closing mid-run, which closes it and so comes
    last in this file): each launch of Qt WebEngine is 1.5-2.5 s of CPU. The launch itself is the
    first test's, twice over. Its folder is picked twice, the second time after a run, as a person
    picks another folder for the next run."""
    tmp = tmp_path_factory.mktemp("window")
    app = App(tmp, display, tmp / "state")
    try:
        yield app
    finally:
        app.kill()


def _start_run(app: App) -> str:
    app.click("start")
    return str(
        app.wait_js("the run's page", "(/^#\\/runs\\/([0-9a-f]{32})$/.exec(location.hash) || [])[1] || null", 120)
    )


def _closes_leaving_nothing(app: App) -> None:
    assert app.close_window() == 0, app.stderr()
    assert "loopwarden: app closed" in app.stderr()
    wait_for("the app's helper processes to end", lambda: not app.session_processes(), 120)


def test_the_app_runs_the_example_end_to_end_and_closes_leaving_nothing(tmp_path: Path, display: str) -> None:
    data, state, screens = copy_example(tmp_path), tmp_path / "state", tmp_path / "screens"
    app = App(tmp_path, display, state)
    try:
        assert app.js("document.getElementById('picked-folder').textContent") == "no folder chosen yet"
        screenshot(display, screens / "start.png")

        app.pick_folder(data)
        assert app.js("document.getElementById('folder-select').value") == str(data)
        run_id = _start_run(app)
        status = app.wait_js(
            "the run to finish", f"{FINAL} && document.getElementById('run-status').textContent", RUN_S
        )
        assert status == "completed", app.js("document.getElementById('run-message').textContent")
        app.wait_js("the result card", "!document.getElementById('result-card').hidden")
        timeline = app.js("[...document.querySelectorAll('#timeline li')].map(li => li.dataset.type)")
        assert timeline[0] == "run_queued" and timeline[-1] == "report_finished"
        assert app.js("document.getElementById('run-message').textContent").startswith("report written")
        out = state.resolve() / "runs" / run_id / "out"
        has_pdf = (out / "report.pdf").is_file()
        assert has_pdf == (shutil.which("xelatex") is not None)
        if has_pdf:
            assert app.js("document.getElementById('pdf').getAttribute('src')").endswith(
                f"/{run_id}/artifacts/report.pdf"
            )
            app.click("open-pdf")
            app.wait_js(
                "the open PDF's note", "document.getElementById('desktop-status').textContent.startsWith('Opened')"
            )
            assert wait_for(
                "the viewer's call", lambda: str(out / "report.pdf") in iter_lines(tmp_path / "opened.txt"), 60
            )
        app.click("show-folder")
        app.wait_js(
            "the show-folder note", "document.getElementById('desktop-status').textContent.startsWith('Showed')"
        )
        assert wait_for("the file manager's call", lambda: str(out) in iter_lines(tmp_path / "opened.txt"), 60)
        screenshot(display, screens / "end.png")

        # A second launch on the same run store: the first window comes to the front (it takes the
        # keyboard focus back from the desktop), no second server.
        window = app.window_id()
        root = XWindows(display).focus_root()
        wait_for("the focus on the desktop", lambda: xdotool(display, "getwindowfocus") == str(root), 60)
        second = run_cli(["app", "--state-dir", str(state)], app_env(tmp_path, display), tmp_path, timeout=120)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == f"loopwarden: already open on {app.url}; brought its window to the front"
        wait_for("the first window to hear of it", lambda: "brought it to the front" in app.stderr(), 60)
        wait_for("the first window to take the focus", lambda: xdotool(display, "getwindowfocus") == str(window), 60)
        assert app.process.poll() is None

        _closes_leaving_nothing(app)
    finally:
        app.kill()
    assert {p.name for p in screens.iterdir()} == {"start.png", "end.png"}

    # Runs persist: the next launch lists the finished run from the same store, and the folder
    # picked last is still the one allowed.
    again = App(tmp_path, display, state, name="again")
    try:
        assert again.js("document.getElementById('picked-folder').textContent") == str(data)
        again.wait_js(
            "the earlier run in the list",
            f"document.querySelector('#runs tr[data-id=\"{run_id}\"] .status')?.textContent === 'completed'",
        )
        _closes_leaving_nothing(again)
    finally:
        again.kill()


def _paused_at_the_first_figure(app: App, data: Path) -> str:
    """`data` picked, approve figure code ticked, a run started and paused at its first figure;
    the run's id."""
    app.pick_folder(data)
    assert app.js("(() => { document.querySelector('[name=approve_code]').checked = true; return true; })()")
    run_id = _start_run(app)
    app.wait_js("the first approval", "!document.getElementById('approvals-card').hidden", RUN_S)
    return run_id


def test_without_a_display_one_line_points_to_serve(tmp_path: Path, display: str) -> None:
    unused = f":{int(display[1:]) + 50}"
    for env_display in (None, unused):
        result = run_cli(["app", "--state-dir", str(tmp_path / "state")], app_env(tmp_path, env_display), tmp_path)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("error: ") and "loopwarden serve" in line
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


def test_two_processes_never_share_a_port(tmp_path: Path, display: str, window: App) -> None:
    """Two run stores, two windows at once: each on its own port, both answering."""
    first = window
    second = App(tmp_path, display, tmp_path / "two", name="two")
    try:
        assert first.url != second.url
        assert second.js("document.body.dataset.desktop") == "ready"
        assert first.js("document.body.dataset.desktop") == "ready"
        _closes_leaving_nothing(second)
    finally:
        second.kill()
    assert first.process.poll() is None and first.js("document.body.dataset.desktop") == "ready"


def test_a_folder_that_vanishes_mid_run_ends_in_a_clear_state(tmp_path: Path, window: App) -> None:
    """The run pauses at its first figure (approve figure code), the folder is deleted, the figure is
    approved: the run ends with a state that says so, and the window goes on working."""
    app = window
    data = copy_example(tmp_path, screenshot=False)
    _paused_at_the_first_figure(app, data)
    shutil.rmtree(data)

    def decide_all() -> str | None:
        if app.js(FINAL):
            return str(app.js("document.getElementById('run-status').textContent"))
        app.js("[...document.querySelectorAll('#approvals button.approve')].forEach(b => b.click()), true")
        return None

    status = wait_for("the run to end", decide_all, RUN_S, every=1.0)
    # The status comes with the last event; the message with the run's record, read after it.
    app.wait_js("the result card", "!document.getElementById('result-card').hidden")
    message = app.js("document.getElementById('run-message').textContent")
    assert status in ("degraded", "failed"), (status, message)
    assert "the data folder vanished during the run" in message, message
    assert app.js("location.hash = '#/', true")  # the window still answers: back to the list
    app.wait_js("the run list", "document.querySelectorAll('#runs tbody tr').length === 1")


def test_closing_mid_run_cancels_the_run_and_keeps_it(tmp_path: Path, window: App) -> None:
    """A second folder picked in the window after a run (the folder-vanishes test's), a run of it
    waits at its first figure; the close button ends the app cleanly: the run is cancelled (its
    events kept, `cancelled` in the store), the server stopped, no process left."""
    app = window
    data = copy_example(tmp_path, screenshot=False)
    run_id = _paused_at_the_first_figure(app, data)
    assert app.js("document.getElementById('picked-folder').textContent") == str(data)
    _closes_leaving_nothing(app)
    assert "loopwarden: cancelled 1 run(s) as the window closed" in app.stderr()
    record = RunStore(app.state / "runs.db").get_run(run_id)
    assert record.status == "cancelled" and record.message == "cancelled by request" and record.last_seq > 5
