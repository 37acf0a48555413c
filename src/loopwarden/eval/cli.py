"""`loopwarden eval PATH...`: run eval cases, print per-case pass/fail and per-intent metrics,
diff against a baseline; `loopwarden eval-import CASSETTE`: turn a recorded run into a case."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .diff import CaseDiff, MetricDelta, diff_results, metric_deltas, regressions
from .suite import EvalReport, load_report, run_suite

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def print_cases(console: Console, report: EvalReport) -> None:
    table = Table(title="cases", show_lines=False)
    for column in ("case", "intent", "result", "stop reason", "model calls", "tool rounds", "why"):
        table.add_column(column)
    for c in sorted(report.cases, key=lambda c: (c.passed, c.name)):
        verdict = "[green]pass[/]" if c.passed else "[bold red]FAIL[/]"
        why = "; ".join(c.reasons)
        table.add_row(c.name, c.intent, verdict, c.stop_reason, str(c.model_calls), str(c.tool_rounds), why)
    console.print(table)


def print_intents(console: Console, report: EvalReport) -> None:
    table = Table(title="per intent")
    columns = ("intent", "cases", "passed", "avg rounds", "p95 rounds", "dup rate", "candidates", "completion")
    for column in (*columns, "fallback", "false interv.", "stop reasons"):
        table.add_column(column)
    for m in report.intents:
        reasons = ", ".join(f"{k}={v}" for k, v in m.stop_reasons.items())
        false = f"{m.false_interventions}/{m.healthy_cases}" if m.healthy_cases else "-"
        table.add_row(
            m.intent,
            str(m.cases),
            str(m.passed),
            f"{m.avg_tool_rounds:.1f}",
            f"{m.p95_tool_rounds:.0f}",
            f"{m.duplicate_call_rate:.0%}",
            f"{m.avg_candidates:.1f}",
            f"{m.completion_rate:.0%}",
            f"{m.fallback_rate:.0%}",
            f"[bold red]{false}[/]" if m.false_interventions else false,
            reasons,
        )
    console.print(table)


def print_detectors(console: Console, report: EvalReport) -> None:
    """Per detector over the cases marked `loop` / `healthy`, and the suite's false interventions."""
    suite = report.suite
    if suite.detectors:
        table = Table(title="per detector (cases marked loop / healthy)")
        for column in ("detector", "loops caught", "first turn, median", "first turn, worst", "false interv."):
            table.add_column(column)
        for d in suite.detectors:
            median = "-" if d.first_turn_median is None else f"{d.first_turn_median:g}"
            worst = "-" if d.first_turn_worst is None else str(d.first_turn_worst)
            table.add_row(d.detector, str(d.loops_caught), median, worst, str(d.false_interventions))
        console.print(table)
    if suite.loop_cases or suite.healthy_cases:
        style = "bold red" if suite.false_interventions else "green"
        console.print(
            f"loops stopped or steered: {suite.loops_caught}/{suite.loop_cases}; "
            f"[{style}]false interventions: {suite.false_interventions}/{suite.healthy_cases} healthy cases "
            f"({suite.false_intervention_rate:.0%})[/]"
            + (f": {', '.join(suite.false_intervention_cases)}" if suite.false_intervention_cases else "")
        )


def print_diff(console: Console, diffs: list[CaseDiff]) -> None:
    changed = [d for d in diffs if d.change != "unchanged"]
    if not changed:
        console.print("baseline: no case changed")
        return
    table = Table(title="against the baseline")
    for column in ("change", "case", "before", "after", "why"):
        table.add_column(column)
    for d in changed:
        style = "bold red" if d.change == "regressed" else "green" if d.change == "fixed" else ""
        change = f"[{style}]{d.change}[/]" if style else d.change
        table.add_row(change, d.name, d.before, d.after, "; ".join(d.reasons))
    console.print(table)


def print_deltas(console: Console, deltas: list[MetricDelta]) -> None:
    if not deltas:
        return
    table = Table(title="per-intent numbers that moved")
    for column in ("intent", "metric", "before", "after"):
        table.add_column(column)
    for d in deltas:
        table.add_row(d.intent, d.metric, f"{d.before:.3g}", f"{d.after:.3g}")
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_command(
        paths: Annotated[list[Path], typer.Argument(help="Case files or folders of them (*.yaml).")],
        baseline: Annotated[
            Path | None, typer.Option(help="An earlier report (--json or --save); exit non-zero on any regression.")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of tables.")] = False,
        save: Annotated[Path | None, typer.Option(help="Also write the JSON report here (a future baseline).")] = None,
        disable: Annotated[
            list[str] | None, typer.Option(help="Switch a detector off (repeatable), e.g. to see what it catches.")
        ] = None,
        concurrency: Annotated[int, typer.Option(min=1, help="Cases run at once.")] = 8,
        traces: Annotated[
            Path | None, typer.Option(help="Write each case's events here as <case>.jsonl (to see why it failed).")
        ] = None,
    ) -> None:
        """Run eval cases: per case pass/fail with the reason, per intent the loop metrics, per
        detector what it caught; exit 1 on a failure (a regression) or any false intervention."""
        console = Console(stderr=as_json, width=200)
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            console.print(f"[red]no such file or folder: {', '.join(missing)}[/]")
            raise typer.Exit(EXIT_USAGE)
        try:
            old = load_report(baseline) if baseline else None
            report = asyncio.run(run_suite(paths, disabled=disable or [], concurrency=concurrency, trace_dir=traces))
        except (ValueError, OSError) as error:
            console.print(f"[red]{error}[/]")
            raise typer.Exit(EXIT_USAGE) from None
        diffs = diff_results(old.cases, report.cases) if old else []
        if save:
            save.write_text(report.model_dump_json(indent=1), encoding="utf-8")
        if as_json:
            payload = report.model_dump(mode="json")
            if old:
                payload["diff"] = [d.model_dump() for d in diffs if d.change != "unchanged"]
                payload["metric_deltas"] = [d.model_dump() for d in metric_deltas(old.intents, report.intents)]
            typer.echo(json.dumps(payload, indent=1))
        else:
            print_cases(console, report)
            print_intents(console, report)
            print_detectors(console, report)
            if old:
                print_diff(console, diffs)
                print_deltas(console, metric_deltas(old.intents, report.intents))
            console.print(f"{report.passed}/{len(report.cases)} cases passed")
        failed = bool(regressions(diffs)) if old else bool(report.failed)
        # A false intervention fails the eval even when the baseline had it too.
        raise typer.Exit(EXIT_FAILED if failed or report.suite.false_interventions else EXIT_OK)

    @app.command("eval-import")
    def eval_import(
        cassette: Annotated[
            Path, typer.Argument(help="A cassette saved from a real run (RecordingModel), or a run id with --db.")
        ],
        out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the case (YAML).")],
        name: Annotated[str | None, typer.Option(help="Case name (default: the file name).")] = None,
        intent: Annotated[str, typer.Option(help="Intent the case belongs to.")] = "default",
        db: Annotated[
            Path | None,
            typer.Option(help="A traced run store: import the run id given (its cassette goes next to -o)."),
        ] = None,
    ) -> None:
        """Turn a recorded run into a regression case: replayed model, canned tool results."""
        from .importer import case_from_cassette, case_from_run

        try:
            if db is None:
                text = case_from_cassette(cassette, out, name=name, intent=intent)
            else:
                text = case_from_run(db, str(cassette), out, name=name, intent=intent)
        except (ValueError, OSError) as error:
            typer.echo(f"cannot import {cassette}: {error}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}; edit its `expect:` block, then run: loopwarden eval {out}")
