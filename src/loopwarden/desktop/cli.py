"""`loopwarden app`: the report service in a native window."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

HELP = "Open the report service in a native window (the app extra): pick a folder, run, read the PDF."


def register(app: typer.Typer) -> None:
    @app.command("app", help=HELP)
    def open_app(
        state_dir: Annotated[
            Path, typer.Option(help="Where the run store and run folders live (the same as `loopwarden serve`).")
        ] = Path("loopwarden-runs"),
        concurrency: Annotated[int, typer.Option(min=1, help="Runs executing at once.")] = 2,
    ) -> None:
        from .display import display_problem
        from .instance import ask_to_raise, claim

        state_dir = state_dir.expanduser().resolve()  # run folders are stored as absolute paths
        problem = display_problem()
        if problem is not None:
            typer.echo(f"error: {problem}", err=True)
            raise typer.Exit(2)
        if not _qt_installed():
            typer.echo(
                "error: the desktop app needs the app extra: pip install 'loopwarden[app]'"
                " (or run `loopwarden serve` and open its page in a browser)",
                err=True,
            )
            raise typer.Exit(2)
        instance = claim(state_dir)
        if instance is None:
            url = ask_to_raise(state_dir)
            if url is None:
                typer.echo(
                    f"error: another loopwarden server is using {state_dir} (stop it, or pass --state-dir)", err=True
                )
                raise typer.Exit(2)
            typer.echo(f"loopwarden: already open{f' on {url}' if url else ''}; brought its window to the front")
            raise typer.Exit(0)
        try:
            from .window import run_window

            code = run_window(state_dir, instance, concurrency=concurrency)
        finally:
            instance.close()
        raise typer.Exit(code)


def _qt_installed() -> bool:
    try:
        return importlib.util.find_spec("PySide6.QtWebEngineWidgets") is not None
    except ModuleNotFoundError:
        return False
