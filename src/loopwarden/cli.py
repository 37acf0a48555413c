"""The `loopwarden` command. Each part of the project adds its own subcommands through a
`register(app)` function in its own module, so this file stays a table of contents."""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES = (
    "loopwarden.examples.cli",  # demo
    "loopwarden.models.doctor",  # doctor
    "loopwarden.report.cli",  # report
    "loopwarden.server.cli",  # serve
    "loopwarden.durable.cli",  # worker
    "loopwarden.eval.cli",  # eval
    "loopwarden.trace.cli",  # trace
)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="loopwarden",
        help="Tool-calling agents that do not loop. The model proposes; the runtime decides.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is not None and name.startswith(error.name):
                continue  # that part is not built yet
            raise
        module.register(app)
    return app


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
