"""`loopwarden demo`: the collapse example from the command line, its runs kept in the run
store (LOOPWARDEN_TRACE_DB, else the user's data folder) unless `--no-trace`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        trace_db: Annotated[
            Path | None,
            typer.Option(help="Run store (SQLite) for the runs [default: LOOPWARDEN_TRACE_DB, else the data folder]."),
        ] = None,
        no_trace: Annotated[bool, typer.Option("--no-trace", help="Keep nothing.")] = False,
    ) -> None:
        """Show a collapsing model being stopped and a healthy one finishing (offline)."""
        from ..trace.tracing import Tracer, default_trace_db, open_store
        from .collapse import main

        tracer: Tracer | bool = False
        if not no_trace:
            trace_db = trace_db or default_trace_db()
            try:
                tracer = Tracer(open_store(str(trace_db), "--trace-db"))
            except ValueError as error:  # an unwritable data folder must not stop the demo
                typer.echo(f"{error}; the runs will not be kept", err=True)
                trace_db = None
        raise typer.Exit(asyncio.run(main(tracer, trace_db=trace_db if tracer else None)))
