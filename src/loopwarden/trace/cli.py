"""`loopwarden trace show TRACE` (a JSONL file, or a run id in a store),
`loopwarden trace list --db runs.db` and `loopwarden trace export RUN_ID --db runs.db -o run.jsonl`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..events import Event
from .summary import TraceSummary, summarise_trace

if TYPE_CHECKING:
    from .store import RunStore

EXIT_USAGE = 2


def _store(db: Path) -> RunStore:
    """The run store at `db`; ValueError (a ConfigError is one) with what is wrong, never a traceback:
    no file, not a store, or a store a newer loopwarden wrote."""
    import sqlite3

    from .store import RunStore

    if not db.is_file():
        raise ValueError(f"no run store at {db}")
    try:
        return RunStore(db)
    except sqlite3.Error as error:
        raise ValueError(f"{db} is not a readable run store: {error}") from None


def _load(trace: str, db: Path | None) -> list[Event]:
    from .jsonl import read_jsonl

    path = Path(trace)
    if db is None:
        if not path.is_file():
            raise ValueError(f"no trace file {trace!r} (give --db to read a run id from a store)")
        return read_jsonl(path)
    events = _store(db).events(trace)
    if not events:
        raise ValueError(f"no events for run {trace!r} in {db}")
    return events


def print_summary(console: Console, summary: TraceSummary) -> None:
    console.print(f"trace {summary.trace_id}  intent={summary.intent}  status={summary.status}")
    console.print(f"stop reason: {summary.stop_reason}")
    if summary.totals is not None:
        t = summary.totals
        console.print(
            f"model calls {t.model_calls}, tool executions {t.tool_executions}, duplicates avoided "
            f"{t.duplicates_avoided}, tokens {t.prompt_tokens} in / {t.completion_tokens} out"
        )
    if summary.checklist is not None:
        console.print("checklist: " + ", ".join(f"{k}={'done' if v else 'open'}" for k, v in summary.checklist.items()))
    table = Table()
    for column in ("turn", "tool", "args hash", "result", "verdicts"):
        table.add_column(column)
    for c in summary.calls:
        verdicts = ", ".join(v for v in c.verdicts if not v.endswith(":allow"))
        table.add_row(str(c.turn), c.tool, c.args_hash, c.status, verdicts)
    console.print(table)
    if summary.run_verdicts:
        console.print("run verdicts: " + ", ".join(summary.run_verdicts))


def register(app: typer.Typer) -> None:
    trace_app = typer.Typer(help="Read kept runs: summaries and JSONL export.", no_args_is_help=True)
    app.add_typer(trace_app, name="trace")

    @trace_app.command("show")
    def show(
        trace: Annotated[str, typer.Argument(help="A JSONL trace file, or a run id with --db.")],
        db: Annotated[Path | None, typer.Option(help="A run store (SQLite) to read the run id from.")] = None,
    ) -> None:
        """Summarise a trace: calls with argument hashes, results, verdicts, checklist, stop reason."""
        try:
            events = _load(trace, db)
            summary = summarise_trace(events)
        except ValueError as error:
            typer.echo(str(error), err=True)
            raise typer.Exit(EXIT_USAGE) from None
        print_summary(Console(width=160), summary)

    @trace_app.command("list")
    def list_runs(
        db: Annotated[Path, typer.Option(help="The run store (SQLite).")],
        limit: Annotated[int, typer.Option(min=1, help="How many runs, newest first.")] = 20,
    ) -> None:
        """The newest runs of a store (Agent(trace=...), LOOPWARDEN_TRACE_DB, loopwarden demo)."""
        import sqlite3
        import time

        try:
            runs = _store(db).list_runs(limit=limit)
        except sqlite3.Error as error:  # not a run store: say so, never a traceback
            typer.echo(f"{db} is not a readable run store: {error}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        except ValueError as error:
            typer.echo(str(error), err=True)
            raise typer.Exit(EXIT_USAGE) from None
        table = Table()
        for column in ("run id", "started", "kind", "model", "status", "stop reason", "model calls"):
            table.add_column(column)
        for run in runs:
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created_at))
            calls = str((run.totals or {}).get("model_calls", ""))
            model = str(run.params.get("model", ""))
            table.add_row(run.id, started, run.kind, model, run.status, ", ".join(run.stop_reasons), calls)
        Console(width=200).print(table)

    @trace_app.command("export")
    def export(
        run_id: Annotated[str, typer.Argument(help="The run to export.")],
        db: Annotated[Path, typer.Option(help="The run store (SQLite).")],
        out: Annotated[Path, typer.Option("--out", "-o", help="The JSONL file to write.")],
    ) -> None:
        """Write a stored run's events as JSON lines, exactly as committed."""
        from .jsonl import export_run

        try:
            store = _store(db)
        except ValueError as error:
            typer.echo(str(error), err=True)
            raise typer.Exit(EXIT_USAGE) from None
        count = export_run(store, run_id, out)
        if count == 0:
            out.unlink(missing_ok=True)
            typer.echo(f"no events for run {run_id!r} in {db}", err=True)
            raise typer.Exit(EXIT_USAGE)
        typer.echo(f"wrote {count} events to {out}")
