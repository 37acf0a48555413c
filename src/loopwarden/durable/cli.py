"""`loopwarden worker`: runs durable runs from the shared queue (Postgres). Start any number, on
any machines that see the same database and the same run folders; stop one with Ctrl-C or
SIGTERM, or lose it: its runs are picked up where their steps stopped (engine.py)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

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

            engine = launch(Database.resolve(state_dir), executes_runs=True)
        except ModuleNotFoundError as error:
            typer.echo(f"error: durable runs need the durable extra ({error.name} is missing)", err=True)
            raise typer.Exit(2) from None
        except DatabaseError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from None
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        typer.echo(f"loopwarden: worker {engine.executor_id} ready on {engine.database.describe()}", err=True)
        stop.wait()
        engine.shutdown()
