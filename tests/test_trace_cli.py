"""The CLI traces by default: `loopwarden demo` (a real subprocess) keeps its runs in the run
store named by LOOPWARDEN_TRACE_DB, else in the user's data folder, unless --no-trace; a store
it cannot open never stops the demo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from loopwarden.trace.exchanges import load_exchanges
from loopwarden.trace.store import RunStore
from loopwarden.trace.tracing import TRACE_DB_ENV


def demo(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != TRACE_DB_ENV}
    base.update({"XDG_DATA_HOME": str(tmp_path / "data"), "COLUMNS": "200"}, **(env or {}))
    command = [sys.executable, "-m", "loopwarden.cli", "demo", *args]
    return subprocess.run(command, env=base, capture_output=True, text=True, timeout=120, check=False)


def test_demo_keeps_both_runs_in_the_data_folder_by_default(tmp_path: Path) -> None:
    done = demo(tmp_path)
    assert done.returncode == 0, done.stderr
    db = tmp_path / "data" / "loopwarden" / "runs.db"
    store = RunStore(db)
    runs = {r.params["model"]: r for r in store.list_runs()}
    assert runs["collapsing"].status == "degraded" and runs["collapsing"].stop_reasons == ["repeated_call"]
    assert runs["healthy"].status == "completed"
    collapse = runs["collapsing"].id
    assert f"loopwarden trace show {collapse} --db {db}" in done.stdout
    assert store.events(collapse)[-1].type == "run_finished"
    assert len(load_exchanges(store, collapse)) == runs["collapsing"].totals["model_calls"]  # type: ignore[index]


def test_the_environment_names_the_store_and_no_trace_keeps_nothing(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    assert demo(tmp_path, env={TRACE_DB_ENV: str(db)}).returncode == 0
    assert len(RunStore(db).list_runs()) == 2
    assert demo(tmp_path, "--no-trace").returncode == 0
    assert not (tmp_path / "data").exists()


def test_a_store_that_cannot_be_opened_does_not_stop_the_demo(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    done = demo(tmp_path, "--trace-db", str(blocked / "runs.db"))
    assert done.returncode == 0 and "will not be kept" in done.stderr
    assert "collapse stopped: True" in done.stdout


def test_trace_list_names_the_runs_of_a_store_newest_first(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from loopwarden.cli import build_app

    db = tmp_path / "env.db"
    assert demo(tmp_path, env={TRACE_DB_ENV: str(db)}).returncode == 0
    app, cli = build_app(), CliRunner()
    listed = cli.invoke(app, ["trace", "list", "--db", str(db)], terminal_width=200)
    assert listed.exit_code == 0, listed.output
    for run in RunStore(db).list_runs():
        line = next(line for line in listed.output.splitlines() if run.id in line)
        assert run.status in line and run.params["model"] in line
    (tmp_path / "junk.db").write_text("not sqlite")
    for bad in (tmp_path / "none.db", tmp_path / "junk.db"):
        refused = cli.invoke(app, ["trace", "list", "--db", str(bad)])
        assert refused.exit_code == 2 and "Traceback" not in refused.output


def test_every_trace_command_and_serve_refuse_a_store_a_newer_loopwarden_wrote_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from loopwarden.cli import build_app
    from loopwarden.trace.migrations import MIGRATIONS, Migration

    state = tmp_path / "state"
    db = state / "runs.db"
    extra = Migration(len(MIGRATIONS) + 1, "add a column", "ALTER TABLE runs ADD COLUMN owner TEXT;")
    RunStore(db, migrations=(*MIGRATIONS, extra)).create_run(run_id="r", status="running")
    (tmp_path / "junk.db").write_text("not sqlite")
    app, cli = build_app(), CliRunner()
    out = tmp_path / "r.jsonl"
    for command in (["list"], ["export", "r", "-o", str(out)], ["show", "r"]):
        for store, said in ((db, "newer than this loopwarden's"), (tmp_path / "junk.db", "not a readable run store")):
            refused = cli.invoke(app, ["trace", *command, "--db", str(store)])
            assert refused.exit_code == 2 and said in refused.output and "Traceback" not in refused.output, command
    assert not out.exists()
    served = subprocess.run(
        [sys.executable, "-m", "loopwarden.cli", "serve", "--state-dir", str(state), "--port", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert served.returncode == 2 and "Traceback" not in served.stderr
    assert "error: the run store at" in served.stderr and "newer than this loopwarden's" in served.stderr
