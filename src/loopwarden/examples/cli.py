"""`loopwarden demo`: the collapse example from the command line."""

from __future__ import annotations

import asyncio

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def demo() -> None:
        """Show a collapsing model being stopped and a healthy one finishing (offline)."""
        from .collapse import main

        raise typer.Exit(asyncio.run(main()))
