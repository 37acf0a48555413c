"""The command table: `loopwarden --help` lists every command from it without importing the
command modules; each command runs from its own module."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from loopwarden.cli import COMMANDS, build_app, registered_commands


def test_the_table_names_every_registered_command_with_its_own_help() -> None:
    registered: dict[str, str] = {}
    for module_name in sorted({module for module, _ in COMMANDS.values()}):
        for name, command in registered_commands(module_name).items():
            assert COMMANDS[name][0] == module_name, f"{name} is registered by {module_name}"
            registered[name] = command.get_short_help_str(10**6)  # what a listing shows
    assert registered == {name: short for name, (_, short) in COMMANDS.items()}


def test_help_lists_the_commands_and_a_command_runs_from_its_module() -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert all(name in listing for name in COMMANDS)
    result = CliRunner().invoke(build_app(), ["trace", "--help"])
    assert result.exit_code == 0 and "show" in result.output and "list" in result.output  # its own subcommands
    unknown = CliRunner().invoke(build_app(), ["no-such-command"])
    assert unknown.exit_code == 2 and "No such command" in unknown.output


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = subprocess.run([sys.executable, "-m", "loopwarden.cli", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"loopwarden {version('loopwarden')}"
