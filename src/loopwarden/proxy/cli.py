"""`loopwarden proxy --upstream URL`: the guard in front of any OpenAI-compatible endpoint."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from .resume import DEFAULT_ENTRIES


def register(app: typer.Typer) -> None:
    @app.command()
    def proxy(
        upstream: Annotated[str, typer.Option(help="The real endpoint's base URL (…/v1).")],
        host: Annotated[str, typer.Option(help="Address to listen on (loopback only).")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port to listen on.")] = 8766,
        terminal_tool: Annotated[
            list[str] | None, typer.Option(help="A client tool that finishes the task (repeatable).")
        ] = None,
        repeatable_tool: Annotated[
            list[str] | None, typer.Option(help="A polling tool: identical calls allowed (repeatable).")
        ] = None,
        write_tool: Annotated[list[str] | None, typer.Option(help="A tool with side effects (repeatable).")] = None,
        nudge_at: Annotated[int, typer.Option(help="Identical call # that adds a nudge; 0 = off.")] = 3,
        narrow_at: Annotated[int, typer.Option(help="Identical call # that narrows the tools; 0 = off.")] = 4,
        stop_at: Annotated[int, typer.Option(help="Identical call # that stops the task; 0 = off.")] = 5,
        disable_detector: Annotated[
            list[str] | None, typer.Option(help="Switch a detector off by name (repeatable).")
        ] = None,
        max_model_calls: Annotated[int | None, typer.Option(help="Model calls per task.")] = None,
        max_tokens: Annotated[int | None, typer.Option(help="Tokens per task (estimated from the history).")] = None,
        max_tool_rounds: Annotated[int | None, typer.Option(help="Tool rounds per task.")] = None,
        max_cost: Annotated[float | None, typer.Option(help="Cost per task, from estimated tokens at --price.")] = None,
        conversation_max_model_calls: Annotated[
            int | None, typer.Option(help="Model calls per conversation (all its tasks, from the history).")
        ] = None,
        conversation_max_tool_rounds: Annotated[int | None, typer.Option(help="Tool rounds per conversation.")] = None,
        conversation_max_tokens: Annotated[
            int | None, typer.Option(help="Tokens per conversation (estimated from the history).")
        ] = None,
        conversation_max_cost: Annotated[
            float | None, typer.Option(help="Cost per conversation, from estimated tokens at --price.")
        ] = None,
        price: Annotated[
            tuple[float, float] | None,
            typer.Option(help="The upstream's price per million tokens: INPUT OUTPUT.", show_default=False),
        ] = None,
        db: Annotated[
            Path | None, typer.Option(help="Run store for every proxied task (default: LOOPWARDEN_TRACE_DB).")
        ] = None,
        resume_cache: Annotated[
            int, typer.Option(help="Paused runs kept for their conversation's next request; 0 = replay each in full.")
        ] = DEFAULT_ENTRIES,
        quiet: Annotated[
            bool, typer.Option(help="Print nothing per request (the guard's decisions go to stderr).")
        ] = False,
    ) -> None:
        """Guard any agent's loops on the wire: an OpenAI-compatible proxy in front of UPSTREAM."""
        import uvicorn

        from .conversation import ConversationLimits
        from .settings import ProxyOptionError, build_settings

        conversation = ConversationLimits(
            max_model_calls=conversation_max_model_calls,
            max_tool_rounds=conversation_max_tool_rounds,
            max_tokens=conversation_max_tokens,
            max_cost=conversation_max_cost,
        )

        try:
            settings = build_settings(
                upstream=upstream,
                host=host,
                terminal=terminal_tool or [],
                repeatable=repeatable_tool or [],
                writes=write_tool or [],
                rungs=(nudge_at, narrow_at, stop_at),
                disabled=disable_detector or [],
                max_model_calls=max_model_calls,
                max_tokens=max_tokens,
                max_tool_rounds=max_tool_rounds,
                max_cost=max_cost,
                conversation=conversation,
                price=price,
                resume_entries=resume_cache,
                db=db or (Path(os.environ["LOOPWARDEN_TRACE_DB"]) if os.environ.get("LOOPWARDEN_TRACE_DB") else None),
            )
        except ProxyOptionError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from error
        from .app import create_proxy

        typer.echo(f"loopwarden: proxy on http://{host}:{port}/v1 -> {settings.upstream}", err=True)
        if not quiet:
            _print_decisions()
        # Idle client connections are kept longer than a client pool keeps them (httpx, so the openai
        # SDK: 5 s), so a client never sends on a connection the proxy is closing at that moment.
        uvicorn.run(create_proxy(settings), host=host, port=port, log_level="warning", timeout_keep_alive=75)


def _print_decisions() -> None:
    import logging
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    events = logging.getLogger("loopwarden.proxy.events")
    events.addHandler(handler)
    events.setLevel(logging.INFO)
    events.propagate = False
