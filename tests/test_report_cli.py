"""`loopwarden report`: bad input is a one-line error and a non-zero exit with nothing written;
a run prints a progress summary (or JSON lines) and its exit code says how it ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from loopwarden.cli import build_app
from loopwarden.report.cli import EXIT_BAD_INPUT, EXIT_COMPLETED, EXIT_DEGRADED, EXIT_FAILED, live_line, summary
from loopwarden.report.events import ReportFinished
from reportkit import make_folder

runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(build_app(), ["report", *args])
    return result.exit_code, result.stdout, result.stderr


def _assert_one_line_error(code: int, stderr: str, expected: str) -> None:
    assert code == EXIT_BAD_INPUT
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], stderr


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("missing", "does not exist"),
        ("empty", "is empty"),
        ("file", "not a folder"),
        ("hidden_only", "is empty"),
    ],
)
def test_bad_data_folder(tmp_path: Path, setup: str, expected: str) -> None:
    target = tmp_path / "input"
    if setup == "empty":
        target.mkdir()
    elif setup == "file":
        target.write_text("a,b\n1,2\n")
    elif setup == "hidden_only":
        (target / ".git").mkdir(parents=True)
        (target / ".DS_Store").write_text("x")
    out = tmp_path / "out"
    code, _, stderr = _invoke(str(target), "--out", str(out))
    _assert_one_line_error(code, stderr, expected)
    assert not out.exists(), "nothing is written for bad input"


def test_unwritable_output_folder(tmp_path: Path) -> None:
    data = make_folder(tmp_path)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    code, _, stderr = _invoke(str(data), "--out", str(blocker / "out"))
    _assert_one_line_error(code, stderr, "not writable")
    code, _, stderr = _invoke(str(data), "--out", str(blocker))
    _assert_one_line_error(code, stderr, "not a folder")


def test_output_folder_without_write_permission(tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes through permission bits; covered by the path-under-a-file case")
    data = make_folder(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, _, stderr = _invoke(str(data), "--out", str(locked / "out"))
    _assert_one_line_error(code, stderr, "not writable")


def test_unknown_template_and_language(tmp_path: Path) -> None:
    data = make_folder(tmp_path)
    code, _, stderr = _invoke(str(data), "--out", str(tmp_path / "out"), "--template", "nope")
    _assert_one_line_error(code, stderr, "template not found: 'nope'")
    assert "lab" in stderr and "brief" in stderr, "the error names the templates that exist"
    code, _, stderr = _invoke(str(data), "--out", str(tmp_path / "out"), "--lang", "fr")
    _assert_one_line_error(code, stderr, "--lang")
    assert not (tmp_path / "out").exists()


def test_output_folder_equal_to_data_folder_is_refused(tmp_path: Path) -> None:
    data = make_folder(tmp_path)
    code, _, stderr = _invoke(str(data), "--out", str(data))
    _assert_one_line_error(code, stderr, "must not be the data folder")
    code, _, stderr = _invoke(str(data), "--out", str(data / "report"))
    _assert_one_line_error(code, stderr, "must not be inside the data folder")
    assert not (data / "report").exists()


def test_json_lines_run_end_to_end_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LOOPWARDEN_BASE_URL", "LOOPWARDEN_PRESET", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    data = make_folder(tmp_path)
    out = tmp_path / "out"
    code, stdout, _ = _invoke(str(data), "--out", str(out), "--template", "brief", "--no-pdf", "--json", "--offline")
    events = [json.loads(line) for line in stdout.splitlines()]
    assert code == EXIT_COMPLETED, events[-1]
    assert events[-1]["type"] == "report_finished" and events[-1]["status"] == "completed"
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    ends = [(e["index"], e["stage"]) for e in events if e["type"] == "milestone" and e["state"] != "started"]
    assert ends == [(1, "scan"), (2, "explore"), (3, "draft"), (4, "bib")]
    assert {e["total"] for e in events if e["type"] == "milestone"} == {4}
    assert (out / "report.tex").is_file() and (out / "report.md").is_file() and (out / "exploration.json").is_file()
    assert "soil_temp_c" in (out / "report.md").read_text(), "real column names reach the readable report"
    lines = (out / "events.jsonl").read_text().splitlines()
    assert len(lines) == len(events)


def test_exit_codes_map_statuses() -> None:
    from loopwarden.report.cli import EXIT_CODES

    assert EXIT_CODES["completed"] == EXIT_COMPLETED == 0
    assert len({EXIT_CODES["completed"], EXIT_CODES["degraded"], EXIT_CODES["failed"], EXIT_BAD_INPUT}) == 4
    assert EXIT_CODES["degraded"] == EXIT_DEGRADED and EXIT_CODES["failed"] == EXIT_FAILED


def test_live_lines_and_summary_say_what_happened(tmp_path: Path) -> None:
    from rich.console import Console

    from loopwarden.events import GuardVerdict, Totals

    verdict = GuardVerdict(
        run_id="r",
        seq=1,
        ts=0,
        turn=3,
        detector="repeated_call",
        action="stopped",
        reason="same call 3 times",
        tool="read_file",
    )
    line = live_line(verdict)
    assert line is not None and "repeated_call" in line and "stopped" in line and "read_file" in line
    allowed = verdict.model_copy(update={"action": "allowed"})
    assert live_line(allowed) is None
    done = ReportFinished(
        run_id="r", seq=9, ts=0, status="degraded", stop_reasons=["repeated_call"],
        totals=Totals(model_calls=7, tool_executions=12, duplicates_avoided=2, prompt_tokens=100, completion_tokens=50),
        outputs={"report.tex": "report.tex"}, coverage={"read": 5, "unread": 1}, message="written",
    )  # fmt: skip
    console = Console(record=True, width=120)
    console.print(summary(done, tmp_path))
    text = console.export_text()
    for expected in ("degraded", "repeated_call", "7", "12", "150", "5 of 6", str(tmp_path / "report.tex")):
        assert expected in text


def test_degraded_run_exits_with_the_degraded_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A machine without a CJK font still gets its Chinese report, marked degraded with the reason.
    from loopwarden.report import stages

    monkeypatch.setattr(stages, "find_cjk_font", lambda: None)
    data = make_folder(tmp_path)
    out = tmp_path / "out"
    args = ["--out", str(out), "--template", "brief", "--no-pdf", "--json", "--offline", "--lang", "zh"]
    code, stdout, _ = _invoke(str(data), *args)
    last = json.loads(stdout.splitlines()[-1])
    assert code == EXIT_DEGRADED, last
    assert last["status"] == "degraded" and "no CJK font" in last["message"] and "no_cjk_font" in last["stop_reasons"]
    assert (out / "report.tex").is_file()
    code, stdout, _ = _invoke(str(data), *args, "--strict")
    assert code == EXIT_FAILED and json.loads(stdout.splitlines()[-1])["status"] == "failed"


def test_help_fits_80_columns_with_every_option_and_default_whole() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80", "LINES": "50"}
    env.pop("NO_COLOR", None)
    command = [sys.executable, "-m", "loopwarden.cli", "report", "--help"]
    text = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "…" not in text, "a cut-off name, help text or default"
    for option in ("--out", "--template", "--lang", "--preset", "--model", "--base-url", "--config", "--offline",
                   "--strict", "--no-pdf", "--json", "--allow-rlimits-only", "--approve-code"):  # fmt: skip
        assert f" {option} " in text, option
    for default in ("[default: out]", "[default: lab]", "[default: en]"):
        assert default in text
    assert "130 interrupted" in text


async def test_the_bar_moves_inside_a_stage_and_keeps_the_stage_count(tmp_path: Path) -> None:
    from loopwarden.report.cli import StageBar
    from loopwarden.report.events import Milestone, StageProgress
    from loopwarden.report.pipeline import ReportConfig, run_report
    from reportkit import NO_LATEX

    data = make_folder(tmp_path)
    (data / "more.csv").write_text("t,v\n1,2.5\n2,3.5\n3,4.0\n", encoding="utf-8")
    config = ReportConfig(data_dir=data, out_dir=tmp_path / "out", template="brief")
    bar = StageBar()
    seen: list[tuple[str, float, str]] = []
    async for event in run_report(config, toolchain=NO_LATEX):
        if bar.step(event):
            seen.append((event.type, bar.completed, bar.description))
    totals = {bar.total}
    assert totals == {4}
    inside = [(completed, text) for kind, completed, text in seen if kind == "stage_progress"]
    assert inside[0] == (1.0, "explore · 0/3 files read")  # the plan shown before the first read
    assert inside[-1][1].startswith("explore · 3/3 files read")
    assert all(1.0 <= completed < 2.0 for completed, _ in inside), "the bar stays inside the explore stage"
    completed = [c for _, c, _ in seen]
    assert completed == sorted(completed) and completed[-1] == 4.0
    # What the bar reads is what the events say: files read only grows, never past the plan.
    events = [e async for e in run_report(config.model_copy(update={"out_dir": tmp_path / "o2"}), toolchain=NO_LATEX)]
    steps = [e for e in events if isinstance(e, StageProgress)]
    reads = [s.files_read for s in steps]
    assert reads == sorted(reads) and all(s.files_planned == 3 for s in steps)
    explore = [e.seq for e in events if isinstance(e, Milestone) and e.stage == "explore"]
    assert all(explore[0] < s.seq < explore[1] for s in steps)


def test_summary_of_an_offline_run_says_no_model_not_zero_tokens(tmp_path: Path) -> None:
    from rich.console import Console

    from loopwarden.events import Totals
    from loopwarden.report.stage_tally import StageTally

    tally = StageTally()
    done = ReportFinished(run_id="r", seq=9, ts=0, status="completed", totals=Totals(model_calls=6), message="ok")
    console = Console(record=True, width=120)
    console.print(summary(done, tmp_path, tally))
    text = console.export_text()
    assert "offline explorer and writer, no model" in text and "tokens" not in text
