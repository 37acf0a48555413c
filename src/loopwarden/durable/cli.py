"""`loopwarden worker`: runs durable runs from the shared queue (Postgres). Start any number, on
any machines that see the same database and the same run folders; stop one with Ctrl-C or
SIGTERM, or lose it: its runs are picked up where their steps stopped (engine.py)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import typer

from ..errors import ConfigError
from .database import DATABASE_URL_ENV, Database, DatabaseError


def register(app: typer.Typer) -> None:
    @app.command()
    def worker(
        state_dir: Annotated[Path, typer.Option(help="Local folder for this worker's files.")] = Path(
            "loopwarden-worker"
        ),
    ) -> None:
        """Run durable runs from the queue shared through LOOPWARDEN_DATABASE_URL (postgresql://...)."""
        if not os.environ.get(DATABASE_URL_ENV):
            typer.echo(
                f"error: loopwarden worker needs {DATABASE_URL_ENV}=postgresql://...; with the embedded SQLite"
                " default, `loopwarden serve --durable` runs the runs itself",
                err=True,
            )
            raise typer.Exit(2)
        try:
            from .engine import launch

            engine = launch(Database.resolve(state_dir), executes_runs=True, on_lost=_stop_now)
        except ModuleNotFoundError as error:
            typer.echo(f"error: durable runs need the durable extra ({error.name} is missing)", err=True)
            raise typer.Exit(2) from None
        except (DatabaseError, ConfigError) as error:  # ConfigError: a store a newer loopwarden wrote
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        typer.echo(f"loopwarden: worker {engine.executor_id} ready on {engine.database.describe()}", err=True)
        stop.wait()
        engine.shutdown()


LOST_EXIT = 3


def _stop_now(message: str) -> None:
    """The worker's slot is gone, so its runs may already be running elsewhere: not one more step
    here (no clean shutdown, which would wait for workflows to write)."""
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    os._exit(LOST_EXIT)
