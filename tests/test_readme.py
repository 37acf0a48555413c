"""Every code block of the README, as written: Python blocks run (and pass `mypy --strict`), shell
blocks name commands, options, files and extras that exist, the YAML block is an eval case, the
text block is what `loopwarden proxy` prints for the scenario it describes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from loopwarden.cli import build_app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int

    def __str__(self) -> str:
        return f"{self.lang}@{self.line}"


def readme_blocks() -> list[Block]:
    blocks, lines = [], README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            blocks.append(Block(fence.group(1), "\n".join(lines[i + 1 : end]) + "\n", i + 1))
            i = end
        i += 1
    return blocks


BLOCKS = readme_blocks()
PYTHON = [b for b in BLOCKS if b.lang == "python"]
SHELL = [b for b in BLOCKS if b.lang == "bash"]

# What each Python block prints, found by a line of its code: a block without an entry fails.
PRINTS = {
    'agent.run_sync("Summarise README.md")': "completed terminal_tool a README 2",
    "async def main() -> None:": "11.5\nChecking the forecast... 11.5 degrees in Oslo.",
    "triage.run_sync(": "Order A1 is refunded. ['handed_off']",
    "record my weight 72.5": "completed checklist_complete Recorded 72.5; no earlier readings in the last two weeks.",
    "Run the tests and tell me how it went.": "All 12 tests passed.",
    "config = load_endpoint_config()": "(offline: no endpoint configured)",
    'trace="runs.db"': "",
    "charged.setdefault(key, cents)": "charged 500 cents / charged 500 cents",
    "with MCPTools.stdio(": "('read', False) ('write', True)\ndegraded repeated_call 1",
}


def test_every_block_has_a_kind_this_module_checks() -> None:
    assert {b.lang for b in BLOCKS} <= {"python", "bash", "yaml", "text"}, [str(b) for b in BLOCKS]
    assert len(PYTHON) == len(PRINTS) and all(any(key in b.code for b in PYTHON) for key in PRINTS)


@pytest.fixture
def offline_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder holding the README, and no endpoint, key or trace store in the environment."""
    for name in list(os.environ):
        if name.startswith("LOOPWARDEN_") or name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    shutil.copy(README, tmp_path / "README.md")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("block", PYTHON, ids=str)
def test_python_block_runs_as_written(block: Block, offline_user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = next(out for key, out in PRINTS.items() if key in block.code)
    exec(compile(block.code, f"README.md:{block.line}", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip() == expected
    if 'trace="runs.db"' in block.code:
        from loopwarden.trace.store import RunStore

        (run,) = RunStore(offline_user / "runs.db").list_runs()
        assert run.status == "completed"


def test_python_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    """The public API as the README uses it is typed: `result.output` is the `output_type`, `ctx.deps`
    the deps type (the blocks' `assert_type` lines fail here otherwise)."""
    from mypy import api

    files = []
    for block in PYTHON:
        path = tmp_path / f"readme_{block.line}.py"
        path.write_text(block.code, encoding="utf-8")
        files.append(str(path))
    cache = ROOT / ".mypy_cache"
    out, err, status = api.run(["--strict", "--cache-dir", str(cache), "--no-error-summary", *files])
    assert status == 0, out + err


def test_the_yaml_block_is_the_case_test_eval_runs() -> None:
    (block,) = [b for b in BLOCKS if b.lang == "yaml"]
    text = README.read_text(encoding="utf-8")
    assert text.split("A case is one YAML file:", 1)[1].split("```yaml", 1)[1].split("```", 1)[0] == "\n" + block.code


def test_the_proxy_sample_is_what_the_proxy_prints() -> None:
    """The proxy's decisions for a coding agent whose model keeps reading one file, as the README
    shows them (times aside): a real `loopwarden proxy` process, the `openai` SDK as the agent."""
    from proxykit import decisions_printed_for_a_coding_agent

    (block,) = [b for b in BLOCKS if b.lang == "text"]
    shown = [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in block.code.splitlines()]
    assert decisions_printed_for_a_coding_agent() == shown


# -- shell blocks ------------------------------------------------------------------------------------

APP = typer.main.get_command(build_app())
USERS_SCRIPT = "my_agent.py"  # the reader's own program, in the tracing example
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def _commands(block: Block) -> Iterator[list[str]]:
    """Each simple command of a block, comments and line continuations removed, `VAR=x` dropped."""
    text = block.code.replace("\\\n", " ")
    for line in text.splitlines():
        words = shlex.split(re.sub(r"\s\d?>>?\s*[^\s&|;]+", " ", line), comments=True)  # no redirections
        command: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", "|", ";"):
                while command and re.fullmatch(r"[A-Z_]+=.*", command[0]):
                    command.pop(0)
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def _check_loopwarden(args: list[str]) -> None:
    command: Any = APP
    while getattr(command, "commands", None) and args and not args[0].startswith("-"):
        sub = command.commands.get(args[0])
        assert sub is not None, f"no command {args[0]!r}"
        command, args = sub, args[1:]
    options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    for word in args:
        if word.startswith("-") and word != "-":
            assert word.split("=")[0] in options, f"{command.name}: no option {word}"


def _check(command: list[str]) -> None:
    name = command[0].removeprefix(".venv/bin/")
    if name == "loopwarden":
        _check_loopwarden(command[1:])
    elif name in ("python", "python3") and command[1:2] == ["-m"]:
        module = command[2]
        assert module in ("venv", "pytest") or (ROOT / "src" / Path(*module.split("."))).with_suffix(".py").exists()
    elif name in ("python", "python3", "bash"):
        assert command[1] == USERS_SCRIPT or (ROOT / command[1]).is_file(), command
    elif name == "pip":
        for word in command:
            if match := re.fullmatch(r"(?:-e )?(?:\.|loopwarden)\[(.+)\]", word):
                assert set(match.group(1).split(",")) <= EXTRAS, word
    elif name == "apt-get":
        packages = {word for word in command[2:] if not word.startswith("-")}
        assert command[1] == "install" and packages <= _ci_apt_packages(), packages - _ci_apt_packages()
    else:
        assert name in ("export",), f"a command this test does not know: {command}"


def _ci_apt_packages(name: str = "*") -> set[str]:
    """The Debian packages `.ci/run` installs (one per line, `#` comments)."""
    words = set()
    for path in (ROOT / ".ci" / "apt").glob(f"{name}.txt"):
        for line in path.read_text(encoding="utf-8").splitlines():
            words.update(line.split("#", 1)[0].split())
    return words


def test_the_desktop_apps_debian_packages_are_those_ci_installs() -> None:
    (line,) = [c for b in SHELL for c in _commands(b) if c[0] == "apt-get" and "libxcb-cursor0" in c]
    assert {word for word in line[2:] if not word.startswith("-")} == _ci_apt_packages("app")


@pytest.mark.parametrize("block", SHELL, ids=str)
def test_shell_block_names_commands_options_files_and_extras_that_exist(block: Block) -> None:
    commands = list(_commands(block))
    assert commands
    for command in commands:
        _check(command)


def test_the_shell_check_catches_a_misspelt_option() -> None:
    with pytest.raises(AssertionError, match="--baseline-file"):
        _check(["loopwarden", "eval", "evals/", "--baseline-file", "b.json"])
    with pytest.raises(AssertionError, match="no command"):
        _check(["loopwarden", "evaluate", "evals/"])
