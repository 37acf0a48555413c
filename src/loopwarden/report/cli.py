"""`loopwarden report DATA_DIR`: a report from a data folder, with a progress bar whose
denominator is fixed by the plan, live lines for what the guards decide, and a summary."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..events import ApprovalDecided, Event, GuardVerdict
from .approvals import NO_TERMINAL, DenyAll, TerminalGate
from .events import Milestone, ReportFinished, StageProgress
from .stage_tally import StageTally

EXIT_COMPLETED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_DEGRADED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = {
    "completed": EXIT_COMPLETED,
    "degraded": EXIT_DEGRADED,
    "failed": EXIT_FAILED,
    "cancelled": EXIT_INTERRUPTED,
}
LIVE_TYPES = {
    "gap_found",
    "draft_rejected",
    "draft_failed",
    "citations_removed",
    "compile_error",
    "exploration_cut_off",
    "injection_suspected",
}


def _flag(name: str, help: str) -> Any:
    # One name and no shown default (a flag is off unless given): the help fits 80 columns.
    return typer.Option(name, help=help, show_default=False)


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        data_dir: Annotated[Path, typer.Argument(help="The folder with the data, documents and images.")],
        out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")] = Path("out"),
        template: Annotated[str, typer.Option(help="lab, brief or a template folder.")] = "lab",
        lang: Annotated[str, typer.Option(help="Report language: en or zh.")] = "en",
        preset: Annotated[str | None, typer.Option(help="Endpoint preset: deepseek, openai, ollama, ...")] = None,
        model: Annotated[str | None, typer.Option(help="Model name for both tiers.")] = None,
        base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL.")] = None,
        config_file: Annotated[Path | None, typer.Option("--config", help="Endpoint TOML file.")] = None,
        offline: Annotated[bool, _flag("--offline", "Offline explorer and writer, even if configured.")] = False,
        strict: Annotated[bool, _flag("--strict", "Fail instead of degrading.")] = False,
        no_pdf: Annotated[bool, _flag("--no-pdf", "No PDF (one is made when xelatex is installed).")] = False,
        json_lines: Annotated[bool, _flag("--json", "Print the events as JSON lines.")] = False,
        allow_rlimits_only: Annotated[
            bool, _flag("--allow-rlimits-only", "Draw figures under resource limits only if no OS isolation is found.")
        ] = False,
        approve_code: Annotated[
            bool, _flag("--approve-code", "Ask y/n before model-written figure code runs (no TTY or --json: deny).")
        ] = False,
        draft_attempts: Annotated[
            int | None,
            typer.Option(min=1, help="Drafts asked of the model before the offline writer's is used (default 3)."),
        ] = None,
    ) -> None:
        """Explore a data folder and write the report (report.tex, report.pdf, report.md).

        Exit codes: 0 completed, 3 degraded (written, but cut short), 1 failed, 2 bad input, 130 interrupted.
        """
        code = run_command(
            data_dir, out, template=template, lang=lang, preset=preset, model=model, base_url=base_url,
            config_file=config_file, offline=offline, strict=strict, pdf=not no_pdf, json_lines=json_lines,
            allow_rlimits_only=allow_rlimits_only, approve_code=approve_code, draft_attempts=draft_attempts,
        )  # fmt: skip
        raise typer.Exit(code)


def run_command(
    data_dir: Path,
    out: Path,
    *,
    template: str = "lab",
    lang: str = "en",
    preset: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    config_file: Path | None = None,
    offline: bool = False,
    strict: bool = False,
    pdf: bool = True,
    json_lines: bool = False,
    allow_rlimits_only: bool = False,
    approve_code: bool = False,
    draft_attempts: int | None = None,
) -> int:
    from ..models.config import ConfigError, load_endpoint_config
    from .config import ReportConfig, ReportInputError, validate_report_config

    if lang not in ("en", "zh"):
        _error(f"--lang must be en or zh, not {lang!r}")
        return EXIT_BAD_INPUT
    language: Literal["en", "zh"] = "zh" if lang == "zh" else "en"
    try:
        endpoint = None if offline else load_endpoint_config(
            preset=preset, base_url=base_url, model=model, config_file=config_file
        )  # fmt: skip
        config = ReportConfig(
            data_dir=data_dir,
            out_dir=out,
            template=template,
            lang=language,
            endpoint=endpoint,
            strict=strict,
            pdf=pdf,
            allow_rlimits_only=allow_rlimits_only,
            approve_code=approve_code,
            # None: ReportConfig's default (config.py is imported here, not when the CLI loads)
            **({} if draft_attempts is None else {"draft_attempts": draft_attempts}),
        )
        validate_report_config(config)
    except (ReportInputError, ConfigError) as error:
        _error(str(error))
        return EXIT_BAD_INPUT
    try:
        finished = asyncio.run(_consume(config, json_lines))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: the run was cancelled (events.jsonl says so)\n")
        return EXIT_INTERRUPTED
    return EXIT_CODES.get(finished.status, EXIT_FAILED) if finished else EXIT_FAILED


def _error(message: str) -> None:
    # Plain stderr: one line, never wrapped or styled, so scripts can read it.
    sys.stderr.write(f"error: {' '.join(message.split())}\n")


async def _consume(config: object, json_lines: bool) -> ReportFinished | None:
    from .config import ReportConfig
    from .pipeline import run_report

    assert isinstance(config, ReportConfig)
    # Ask on the terminal only when there is one to read the answer from and the output is for
    # a person; otherwise every call is denied at once, and the approval_decided event says why.
    ask = config.approve_code and not json_lines and sys.stdin.isatty()
    gate = TerminalGate() if ask else DenyAll(reason=NO_TERMINAL)
    if json_lines:
        last = None
        async for event in run_report(config, approvals=gate):
            sys.stdout.write(event.to_json() + "\n")
            sys.stdout.flush()
            last = event
        return last if isinstance(last, ReportFinished) else None
    console = Console(stderr=False)
    return await _with_progress(
        run_report(config, approvals=gate), console, config.out_dir, gate if isinstance(gate, TerminalGate) else None
    )


async def _with_progress(
    events: object, console: Console, out_dir: Path, prompt: TerminalGate | None = None
) -> ReportFinished | None:
    finished: ReportFinished | None = None
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )
    tally = StageTally()
    bar = StageBar()
    task = None
    if prompt is not None:
        prompt.live = progress  # the bar is stopped while a prompt is on screen
    with progress:
        async for event in events:  # type: ignore[attr-defined]
            tally.add(event)
            if bar.step(event):
                if task is None:
                    task = progress.add_task(bar.description, total=bar.total)
                progress.update(task, completed=bar.completed, description=bar.description)
            else:
                line = live_line(event)
                if line:
                    progress.console.print(line, markup=False, highlight=False)
            if isinstance(event, ReportFinished):
                finished = event
    if finished is not None:
        console.print(summary(finished, out_dir, tally))
    return finished


class StageBar:
    """The bar's state: N of the plan's fixed stage count done, and inside the running stage what
    it has done so far (files read of the planned set, figures), moving the bar within that stage."""

    def __init__(self) -> None:
        self.total = 0
        self.completed = 0.0
        self.description = "starting"
        self._label = "starting"
        self._done = 0

    def step(self, event: Event) -> bool:
        """True when the event changed the bar."""
        if isinstance(event, Milestone):
            self.total = event.total
            self._label = str(event.detail.get("label", event.stage))
            if event.state == "started":
                self.description = self._label
            else:
                self._done = event.index
                self.description = f"{self._label} ({event.state})"
            self.completed = float(self._done)
            return True
        if isinstance(event, StageProgress) and self.total:
            share = min(event.files_read / event.files_planned, 0.99) if event.files_planned else 0.0
            self.completed = self._done + share
            self.description = f"{self._label} · {inside_stage(event)}"
            return True
        return False


def inside_stage(event: StageProgress) -> str:
    """ "12/40 files read, 2 figures": what a stage has done so far."""
    text = f"{event.files_read}/{event.files_planned} files read"
    if event.figures_made:
        text += f", {event.figures_made} figure{'s' if event.figures_made != 1 else ''}"
    return text


def live_line(event: Event) -> str | None:
    """One line for what the user should see as it happens (guard verdicts, gaps, errors)."""
    if isinstance(event, GuardVerdict) and event.action != "allowed":
        return f"  guard  {event.detector}: {event.action} {event.tool or ''} — {event.reason}"
    if isinstance(event, ApprovalDecided):
        verdict = "approved" if event.approved else "denied"
        return f"  {verdict}  {event.tool} {event.call_id}" + (f" — {event.reason}" if event.reason else "")
    if event.type == "model_failed":
        data = event.model_dump()
        return f"  model error  {data.get('kind')}: {data.get('message')}"
    if event.type in LIVE_TYPES:
        data = event.model_dump()
        text = data.get("message") or data.get("problem") or ""
        where = f" (line {data['line']})" if data.get("line") is not None else ""
        return f"  {event.type.replace('_', ' ')}  {text}{where}"
    return None


def summary(finished: ReportFinished, out_dir: Path, tally: StageTally | None = None) -> Table:
    t = finished.totals
    table = Table(title=f"report {finished.status}", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("status", f"{finished.status}: {finished.message}")
    table.add_row("stop reasons", ", ".join(finished.stop_reasons) or "-")
    if tally is not None and tally.offline and not t.total_tokens:
        table.add_row("model", "offline explorer and writer, no model")
    else:
        table.add_row("model calls", str(t.model_calls))
        for stage, figures in tally.rows() if tally is not None else []:
            table.add_row(f"  {stage}", figures)
    table.add_row("tool executions", str(t.tool_executions))
    if t.total_tokens or tally is None or not tally.offline:
        table.add_row("tokens", f"{t.total_tokens} ({t.prompt_tokens} in, {t.completion_tokens} out)")
    table.add_row("duplicates avoided", str(t.duplicates_avoided))
    if t.cost:
        table.add_row("cost (list price)", f"{t.cost:.4f}")
    if finished.coverage:
        read = finished.coverage.get("read", 0) + finished.coverage.get("partial", 0)
        parts = ", ".join(f"{n} {status}" for status, n in sorted(finished.coverage.items()))
        table.add_row("files covered", f"{read} of {sum(finished.coverage.values())} ({parts})")
    if finished.coverage_notes:
        table.add_row("not read in full", "\n".join(finished.coverage_notes))
    if finished.suspected_injections:
        table.add_row("suspected prompt injection (treated as data)", "\n".join(finished.suspected_injections))
    for name, rel in finished.outputs.items():
        table.add_row(name, str(out_dir / rel))
    return table
