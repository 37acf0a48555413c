"""The report server inside the app's process: bound to 127.0.0.1 on a port the kernel picks (the
socket is bound here and handed to uvicorn, so no other process can take the port between choosing
and binding it), with a random token for this launch only. The window presents the token on every
request it makes; nothing else on the machine has it, so nothing else can drive the API."""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from ..server.settings import ServerSettings
from .routes import Shell, add_desktop_routes, remembered_folder

_START_TIMEOUT_S = 120.0


def app_settings(state_dir: Path, *, concurrency: int = 2) -> ServerSettings:
    """The same run store and run folders as `loopwarden serve --state-dir` (so runs persist between
    launches and either can read them); the allowed folder is the one the user picked last, if any."""
    remembered = remembered_folder(state_dir)
    return ServerSettings(
        host="127.0.0.1",
        port=0,
        db_path=state_dir / "runs.db",
        runs_dir=state_dir / "runs",
        allowed_roots=[] if remembered is None else [remembered],
        max_concurrency=concurrency,
        token=SecretStr(secrets.token_urlsafe(32)),
    )


class EmbeddedServer:
    """uvicorn on its own thread and event loop. `start()` returns once it accepts connections."""

    def __init__(self, settings: ServerSettings, shell: Shell, job: Any = None) -> None:
        import uvicorn

        from ..server.app import create_app

        self.settings = settings
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        settings.port = self.port
        self.app = create_app(settings, job)
        add_desktop_routes(self.app, shell)
        # ws="none", as `loopwarden serve`: neither the page nor the desktop routes use a WebSocket
        # (live events are SSE), and "auto" imports uvicorn's websockets protocol at each launch.
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", ws="none")
        self._server = uvicorn.Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="loopwarden-app-server", daemon=True)
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def token(self) -> str:
        assert self.settings.token is not None
        return self.settings.token.get_secret_value()

    def start(self) -> None:
        self._thread.start()
        ready = threading.Event()

        def watch() -> None:
            while self._thread.is_alive() and not self._server.started:
                self._thread.join(0.05)
            ready.set()

        threading.Thread(target=watch, daemon=True).start()
        if not ready.wait(_START_TIMEOUT_S) or not self._server.started:
            raise RuntimeError(f"the report server did not start: {self._failure or 'timed out'}")

    def active_runs(self) -> int:
        runner = self.app.state.runner
        return int(runner.active)

    def stop(self) -> list[str]:
        """Cancel the runs still going (each ends `cancelled`, events kept), then stop the server and
        wait for its thread. Returns the ids of the runs cancelled."""
        cancelled: list[str] = []
        loop = self._loop
        if loop is not None and self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self.app.state.runner.cancel_all(), loop)
            try:
                cancelled = future.result(timeout=_START_TIMEOUT_S)
            except Exception:  # the loop is already closing: the server's shutdown ends the runs
                cancelled = []
            self._server.should_exit = True
        self._thread.join(_START_TIMEOUT_S)
        self._socket.close()
        return cancelled

    def _run(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            await self._server.serve(sockets=[self._socket])

        try:
            asyncio.run(serve())
        except BaseException as error:  # reported by start()
            self._failure = error
