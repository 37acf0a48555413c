"""`loopwarden app` without a window: the embedded server (a port the kernel picked, the per-launch
token), the desktop routes with a stand-in desktop, one app per run store, the display check and the
renderer chosen. The window itself is driven under Xvfb in tests/e2e/test_desktop_app.py."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from loopwarden.desktop.display import display_problem
from loopwarden.desktop.embedded import EmbeddedServer, app_settings
from loopwarden.desktop.instance import ask_to_raise, claim
from loopwarden.desktop.routes import FOLDER_FILE
from loopwarden.server.cli import lock_state_dir
from server_jobs import GatedJob, ticking_job


class FakeShell:
    """The desktop, as the routes see it: a dialog that answers `picks` in turn, an opener that notes."""

    def __init__(self, picks: list[Path | None]) -> None:
        self.picks = picks
        self.opened: list[Path] = []

    async def pick_folder(self, start: Path | None) -> Path | None:
        await asyncio.sleep(0)
        return self.picks.pop(0)

    def open_path(self, path: Path) -> bool:
        self.opened.append(path)
        return True


def _wait(check: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def served(tmp_path: Path):  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    data.mkdir()
    (data / "job.json").write_text(json.dumps({"events": 2}))
    shell = FakeShell([data, None, tmp_path / "gone"])
    server = EmbeddedServer(app_settings(tmp_path / "state"), shell, ticking_job)
    server.start()
    yield server, shell, data
    server.stop()


def test_the_server_listens_on_the_port_it_bound_and_only_the_token_drives_it(served) -> None:  # type: ignore[no-untyped-def]
    server, _, _ = served
    with socket.socket() as probe, pytest.raises(OSError):  # the port is held: nobody else can take it
        probe.bind(("127.0.0.1", server.port))
    anonymous = httpx.Client(base_url=server.url, timeout=30)
    assert anonymous.get("/").status_code == 200  # the page itself holds nothing
    for method, path in [("GET", "/api/runs"), ("GET", "/api/app"), ("POST", "/api/app/folder"), ("POST", "/api/runs")]:
        assert anonymous.request(method, path).status_code == 401, path
    assert anonymous.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    window = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    assert window.get("/api/runs").json() == []
    assert len(server.token) >= 32 and server.token != app_settings(Path("x")).token.get_secret_value()  # type: ignore[union-attr]


def test_the_allowed_root_is_the_folder_picked_nothing_more(served, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server, shell, data = served
    window = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    assert window.get("/api/app").json() == {"desktop": True, "folder": None}
    assert window.post("/api/runs", json={"folder": str(data)}).status_code == 400  # nothing picked yet
    assert window.post("/api/app/folder").json() == {"folder": str(data.resolve()), "changed": True}
    assert [f["path"] for f in window.get("/api/folders").json()] == [str(data.resolve())]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    refused = window.post("/api/runs", json={"folder": str(outside)})
    assert refused.status_code == 400 and "allowed" in refused.json()["detail"]
    run = window.post("/api/runs", json={"folder": str(data)}).json()
    _wait(lambda: window.get(f"/api/runs/{run['id']}").json()["status"] == "completed")
    # A cancelled dialog keeps the folder; a folder that is gone is refused, the folder kept.
    assert window.post("/api/app/folder").json() == {"folder": str(data.resolve()), "changed": False}
    gone = window.post("/api/app/folder")
    assert gone.status_code == 400 and "cannot be used" in gone.json()["detail"]
    assert window.get("/api/app").json()["folder"] == str(data.resolve())

    # Open the PDF (none here: 404, nothing opened), show the run's folder; unknown runs are 404s.
    assert window.post(f"/api/app/runs/{run['id']}/open").status_code == 404
    out = Path(window.get(f"/api/runs/{run['id']}").json()["out_dir"])
    (out / "report.pdf").write_bytes(b"%PDF-1.4\n")
    assert window.post(f"/api/app/runs/{run['id']}/open").json() == {"path": str(out / "report.pdf"), "opened": True}
    assert window.post(f"/api/app/runs/{run['id']}/reveal").json() == {"path": str(out), "opened": True}
    assert shell.opened == [out / "report.pdf", out]
    for bad in ("0" * 32, "..", "x" * 40):
        assert window.post(f"/api/app/runs/{bad}/open").status_code == 404

    # The next launch allows the folder picked last, while it is still there; nothing else.
    assert app_settings(tmp_path / "state").allowed_roots == [data.resolve()]
    (tmp_path / "state" / FOLDER_FILE).write_text('{"folder": "relative/path"}')
    assert app_settings(tmp_path / "state").allowed_roots == []
    (tmp_path / "state" / FOLDER_FILE).write_text("not json")
    assert app_settings(tmp_path / "state").allowed_roots == []


def test_closing_cancels_the_runs_still_going_and_keeps_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.md").write_text("a folder the report pipeline accepts\n")
    job = GatedJob()
    server = EmbeddedServer(app_settings(tmp_path / "state"), FakeShell([data]), job)
    server.start()
    window = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=30)
    window.post("/api/app/folder")
    run = window.post("/api/runs", json={"folder": str(data)}).json()
    _wait(lambda: window.get(f"/api/runs/{run['id']}").json()["status"] == "running")
    assert server.active_runs() == 1
    assert server.stop() == [run["id"]]
    with pytest.raises(httpx.ConnectError):
        window.get("/api/runs")
    # The next launch on the same store finds the run cancelled, its events kept.
    again = EmbeddedServer(app_settings(tmp_path / "state"), FakeShell([]), job)
    again.start()
    try:
        client = httpx.Client(base_url=again.url, headers={"Authorization": f"Bearer {again.token}"}, timeout=30)
        record = client.get(f"/api/runs/{run['id']}").json()
        assert record["status"] == "cancelled" and record["last_seq"] >= 3
        assert again.port != 0 and again.token != server.token
    finally:
        again.stop()


def test_one_app_per_run_store_and_a_second_launch_raises_the_first(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = claim(state)
    assert first is not None
    raised: list[str] = []
    assert claim(state) is None
    assert ask_to_raise(state) == ""  # asked before the window exists: answered, replayed later
    first.on_raise(lambda: raised.append("raise"), "http://127.0.0.1:1234/")
    assert raised == ["raise"]
    assert ask_to_raise(state) == "http://127.0.0.1:1234/"
    assert raised == ["raise", "raise"]
    first.close()
    assert ask_to_raise(state) is None
    again = claim(state)
    assert again is not None
    again.close()
    # A `loopwarden serve` on the store: no app answers, so a launch says so instead.
    held = lock_state_dir(state)
    assert held is not None
    try:
        assert claim(state) is None and ask_to_raise(state) is None
    finally:
        held.close()


def test_no_display_is_one_line_pointing_to_serve(tmp_path: Path) -> None:
    assert "loopwarden serve" in (display_problem({}) or "")
    assert "DISPLAY is not set" in (
        display_problem({"WAYLAND_DISPLAY": "wayland-9", "XDG_RUNTIME_DIR": "/nonexistent"}) or ""
    )
    unreachable = display_problem({"DISPLAY": ":4097"})
    assert unreachable is not None and "':4097'" in unreachable and "loopwarden serve" in unreachable
    assert display_problem({"DISPLAY": "nonsense"}) is not None
    result = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "app", "--state-dir", str(tmp_path / "state")],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: no display")
    assert not (tmp_path / "state").exists()


def test_the_software_renderer_is_chosen_only_where_opengl_could_only_be_software(tmp_path: Path) -> None:
    from loopwarden.desktop.rendering import choose_renderer

    no_gpu, dri, nvidia = tmp_path / "none", tmp_path / "dri", tmp_path / "nvidia"
    for dev in (no_gpu, dri / "dri", nvidia):
        dev.mkdir(parents=True)
    (dri / "dri" / "renderD128").touch()
    (nvidia / "nvidia0").touch()
    env: dict[str, str] = {}
    assert choose_renderer(env, no_gpu) == "software" and env == {"QT_QUICK_BACKEND": "software"}
    for dev in (dri, nvidia):
        env = {}
        assert choose_renderer(env, dev) is None and env == {}  # a GPU: Qt's default (OpenGL) stays
    env = {"LIBGL_ALWAYS_SOFTWARE": "1"}
    assert choose_renderer(env, dri) == "software" and env["QT_QUICK_BACKEND"] == "software"
    env = {"QT_QUICK_BACKEND": "rhi"}
    assert choose_renderer(env, no_gpu) is None and env == {"QT_QUICK_BACKEND": "rhi"}  # the user's choice
