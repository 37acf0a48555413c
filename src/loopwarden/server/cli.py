"""`loopwarden serve`: the run service on 127.0.0.1 (anything else needs LOOPWARDEN_TOKEN)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, Annotated

import typer

from .settings import TOKEN_ENV


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs LOOPWARDEN_TOKEN.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
        state_dir: Annotated[Path, typer.Option(help="Where the run store and run folders live.")] = Path(
            "loopwarden-runs"
        ),
        allow_root: Annotated[
            list[Path] | None, typer.Option(help="A folder users may start runs on (repeatable).")
        ] = None,
        concurrency: Annotated[int, typer.Option(min=1, help="Runs executing at once.")] = 2,
        queue: Annotated[int, typer.Option(min=0, help="Runs waiting beyond those; more get 429.")] = 16,
        job: Annotated[str | None, typer.Option(help="module:function to run instead of the report pipeline.")] = None,
        durable: Annotated[
            bool | None,
            typer.Option(
                "--durable/--no-durable",
                help="Runs resume after a crash or restart (DBOS; the durable extra). "
                "On by default when LOOPWARDEN_DATABASE_URL is set: then `loopwarden worker` processes run them.",
            ),
        ] = None,
    ) -> None:
        """Serve report runs over HTTP: API, live events (SSE) and a web page."""
        from .settings import InsecureBinding, ServerSettings, check_binding

        token = os.environ.get(TOKEN_ENV) or None
        settings = ServerSettings(
            host=host,
            port=port,
            db_path=state_dir / "runs.db",
            runs_dir=state_dir / "runs",
            allowed_roots=list(allow_root or []),
            max_concurrency=concurrency,
            max_queue=queue,
            token=token,
            durable=bool(os.environ.get("LOOPWARDEN_DATABASE_URL")) if durable is None else durable,
            database_url=os.environ.get("LOOPWARDEN_DATABASE_URL") or None,
        )
        try:
            check_binding(settings)
        except InsecureBinding as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from error
        lock = lock_state_dir(state_dir)
        if lock is None:
            typer.echo(f"error: another loopwarden server is using {state_dir}", err=True)
            raise typer.Exit(2)
        if settings.durable:
            _check_database(state_dir, settings.database_url)
        import uvicorn

        from .app import create_app
        from .jobs import load_job

        try:
            application = create_app(settings, load_job(job) if job else None)
        except Exception as error:
            import sqlite3

            from ..errors import ConfigError

            # durable/database.py's DatabaseError and a ConfigError (a store a newer loopwarden
            # wrote) are already one clear line; a file that is no SQLite store gets one.
            if isinstance(error, sqlite3.Error):
                error = ValueError(f"{settings.db_path} is not a readable run store: {error}")
            elif not isinstance(error, ConfigError) and type(error).__name__ != "DatabaseError":
                raise
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None
        mode = " (durable)" if settings.durable else ""
        typer.echo(f"loopwarden: serving on http://{host}:{port}/ (runs in {state_dir}){mode}", err=True)
        # ws="none": the app has no WebSocket route (live events are SSE), and uvicorn's "auto"
        # imported the websockets protocol at every start (40 M instructions, callgrind).
        uvicorn.run(application, host=host, port=port, log_level="warning", ws="none")


def _check_database(state_dir: Path, url: str | None) -> None:
    """A wrong or unreachable database, said in one line (exit 2) before the web app, DBOS and the
    job are imported (about 1.3 s of CPU and more of waiting on a loaded machine, only to fail).
    Starting DBOS checks it again: this is the early answer, not the only one."""
    from ..durable.database import Database, DatabaseError

    try:
        Database.resolve(state_dir, url).check()
    except DatabaseError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None


def lock_state_dir(state_dir: Path) -> IO[bytes] | None:
    """Hold an exclusive lock on the state folder for the life of the process: a second server on
    the same store would mark the first one's live runs `interrupted` at its start. The kernel
    drops the lock when the process dies, even by SIGKILL, so a restart after a crash proceeds."""
    state_dir.mkdir(parents=True, exist_ok=True)
    handle = (state_dir / "server.lock").open("ab")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle
