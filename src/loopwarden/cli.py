"""The `loopwarden` command. Each part of the project adds its own subcommands through a
`register(app)` function in its own module, so this file stays a table of contents.

The table also holds each command's one-line help, so `loopwarden --help` imports none of those
modules (nor what they pull in: the report agent, the server, the eval harness); a command's
module is imported when that command runs or its own help is asked for. A test checks the table
against what the modules register.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (module whose register(app) adds it, its one-line help)
    "demo": ("loopwarden.examples.cli", "Show a collapsing model being stopped and a healthy one finishing (offline)."),
    "doctor": (
        "loopwarden.models.doctor",
        "Check the configured model endpoint (reachable, key accepted, model exists, tool calling).",
    ),
    "report": (
        "loopwarden.report.cli",
        "Explore a data folder and write the report (report.tex, report.pdf, report.md).",
    ),
    "serve": ("loopwarden.server.cli", "Serve report runs over HTTP: API, live events (SSE) and a web page."),
    "app": (
        "loopwarden.desktop.cli",
        "Open the report service in a native window (the app extra): pick a folder, run, read the PDF.",
    ),
    "worker": (
        "loopwarden.durable.cli",
        "Run durable runs from the queue shared through LOOPWARDEN_DATABASE_URL (postgresql://...).",
    ),
    "eval": (
        "loopwarden.eval.cli",
        "Run eval cases: per case pass/fail with the reason, per intent the loop metrics, per detector what it"
        " caught; exit 1 on a failure (a regression) or any false intervention.",
    ),
    "eval-import": (
        "loopwarden.eval.cli",
        "Turn a recorded run into a regression case: replayed model, canned tool results.",
    ),
    "trace": ("loopwarden.trace.cli", "Read kept runs: summaries and JSONL export."),
    "proxy": (
        "loopwarden.proxy.cli",
        "Guard any agent's loops on the wire: an OpenAI-compatible proxy in front of UPSTREAM.",
    ),
}

HELP = "Tool-calling agents that do not loop. The model proposes; the runtime decides."


# Context and command types are typer's own click (vendored in recent typer): typed as Any here.


def registered_commands(module_name: str) -> dict[str, Any]:
    """The commands a module's `register(app)` adds, as click commands."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    importlib.import_module(module_name).register(app)
    return dict(typer.main.get_group(app).commands)


class _Commands(dict[str, Any]):
    """A group's commands by name; looking one up imports the module that registers it."""

    def __init__(self, loaded: dict[str, Any]) -> None:
        super().__init__(loaded)
        self.missing: set[str] = set()

    def load(self, name: str) -> None:
        if name not in COMMANDS or name in self.missing or dict.__contains__(self, name):
            return
        module_name, _ = COMMANDS[name]
        try:
            self.update(registered_commands(module_name))
        except ModuleNotFoundError as error:
            if error.name is None or not module_name.startswith(error.name):
                raise  # a dependency is missing: say which
            self.missing.add(name)  # that part of the project is not there: "No such command"

    def __bool__(self) -> bool:  # the table has commands, loaded or not
        return bool(COMMANDS) or super().__len__() > 0

    def get(self, name: str, default: Any = None) -> Any:
        self.load(name)
        return super().get(name, default)

    def __getitem__(self, name: str) -> Any:
        self.load(name)
        return super().__getitem__(name)


class LazyCommands(TyperGroup):
    """Lists the commands of the table; imports a command's module only to run it (or to show
    its own help, or when its command object is looked up)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: _Commands = _Commands(self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        return [name for name in COMMANDS if name not in self.commands.missing]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if dict.__contains__(self.commands, cmd_name):
            return dict.__getitem__(self.commands, cmd_name)
        if cmd_name not in COMMANDS or cmd_name in self.commands.missing:
            return None
        _, short = COMMANDS[cmd_name]
        return TyperCommand(cmd_name, help=short, short_help=short)  # a listing entry: never run

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args:
            self.commands.load(args[0])
        return super().resolve_command(ctx, args)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="loopwarden",
        cls=LazyCommands,
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain click help: rich's help formatter takes longer to import (about 0.3 s) than the
        # rest of `loopwarden --help` together. A command's own help (loopwarden report --help)
        # is still rich's, from that command's app.
        rich_markup_mode=None,
    )

    @app.callback()
    def root(
        version: bool = typer.Option(
            False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ) -> None:  # a group, even before any command is loaded
        pass

    return app


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"loopwarden {version('loopwarden')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "loopwarden (not installed: version unknown)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit()


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
