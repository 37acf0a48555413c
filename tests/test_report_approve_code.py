"""`approve_code`: each make_figure call of a real report run (the offline explorer on the
example folder, the real figure sandbox) waits for a person. An approved figure is drawn, a
denied one is never run, the explorer reads the denial and says so in its record, and the
report still completes. Where nobody can be asked, every call is denied with the reason."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden.events import ApprovalDecided, ApprovalRequired, Event
from loopwarden.policy.approval import ApprovalGate, PendingCall
from loopwarden.report.approvals import NO_GATE, NO_TERMINAL, LineReader, ask_on_terminal
from loopwarden.report.events import ReportFinished
from loopwarden.report.explore.offline import OfflineExplorer
from loopwarden.report.pipeline import ReportConfig, ReportModels, run_report
from reportkit import NO_LATEX

FIELD_SCAN = Path(__file__).resolve().parents[1] / "examples" / "field-scan"
APPROVED, DENIED = "data_scan_1000mA", "data_scan_1500mA"


def _example(beside: Path) -> Path:
    """The example folder without its screenshot, copied next to `beside`: the figures asked about
    are drawn from its CSV files, and reading the screenshot (offline OCR, the engine loaded anew in
    each CLI process) took 2.3 of the 3.3 s of CPU of each CLI run here."""
    folder = beside.parent / "field-scan"
    if not folder.exists():
        shutil.copytree(FIELD_SCAN, folder, ignore=shutil.ignore_patterns("*.png"))
    return folder


def _figure_name(arguments: Any) -> str:
    return str(arguments.get("filename")) if isinstance(arguments, dict) else ""


async def _run(out: Path, gate: ApprovalGate | None, explorer: OfflineExplorer) -> list[Event]:
    config = ReportConfig(data_dir=_example(out), out_dir=out, approve_code=True, pdf=False)
    events: list[Event] = []
    async for event in run_report(config, approvals=gate, toolchain=NO_LATEX, models=ReportModels(explorer=explorer)):
        events.append(event)
        if isinstance(event, ApprovalRequired) and gate is not None:
            # Decided before the next event is pulled: the run is waiting on the gate.
            approve = _figure_name(event.arguments) == APPROVED
            gate.decide(event.call_id, approve, None if approve else "not this one", by="tester")
    return events


def _denied_tool_messages(explorer: OfflineExplorer) -> list[dict[str, Any]]:
    """Tool messages the explorer was sent whose result is a denial."""
    seen = [m for r in explorer.requests for m in r.messages if m.get("role") == "tool"]
    return [m for m in seen if json.loads(m["content"]).get("error_type") == "denied"]


async def test_approved_figure_is_drawn_and_denied_one_never_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    explorer = OfflineExplorer()
    events = await _run(out, ApprovalGate(), explorer)

    asked = [e for e in events if isinstance(e, ApprovalRequired)]
    assert {e.tool for e in asked} == {"make_figure"}
    assert {_figure_name(e.arguments) for e in asked} >= {APPROVED, DENIED}
    decided = {e.call_id: e for e in events if isinstance(e, ApprovalDecided)}
    assert set(decided) == {e.call_id for e in asked}
    denied_ids = {e.call_id for e in asked if _figure_name(e.arguments) != APPROVED}
    assert {c for c, e in decided.items() if not e.approved} == denied_ids

    assert (out / "figures" / f"{APPROVED}.png").stat().st_size > 0
    assert not (out / "figures" / f"{DENIED}.png").exists()
    # The model read the denial of exactly those calls, and its record says what was not run.
    assert {m["tool_call_id"] for m in _denied_tool_messages(explorer)} == denied_ids
    record = json.loads((out / "exploration.json").read_text())
    assert f"make_figure {DENIED}" in record["methodology_notes"]
    assert [f["path"] for f in record["figures"]] == [f"figures/{APPROVED}.png"]
    finished = events[-1]
    assert isinstance(finished, ReportFinished) and finished.status in ("completed", "degraded")
    assert f"figures/{DENIED}.png" not in (out / "report.tex").read_text()
    assert f"{APPROVED}.png" in (out / "report.tex").read_text()


async def test_without_a_gate_every_figure_is_denied_with_the_reason(tmp_path: Path) -> None:
    explorer = OfflineExplorer()
    events = await _run(tmp_path / "out", None, explorer)
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert decided and all(not e.approved and e.reason == NO_GATE for e in decided)
    assert len(_denied_tool_messages(explorer)) == len(decided)
    assert not list((tmp_path / "out" / "figures").glob("*.png"))
    finished = events[-1]
    assert isinstance(finished, ReportFinished) and finished.status in ("completed", "degraded")


def _call(arguments: Any) -> PendingCall:
    return PendingCall(call_id="c1", tool="make_figure", arguments=arguments, turn=1)


def _lines(*answers: str) -> Any:
    queue = list(answers)

    async def read_line() -> str:
        return queue.pop(0)

    return read_line


async def test_terminal_prompt_asks_again_until_yes_or_no_and_end_of_input_denies() -> None:
    out = io.StringIO()
    decision = await ask_on_terminal(
        _call({"code": "plt.plot([1])", "filename": "f"}), out, _lines("maybe\n", "\n", "Y\n")
    )
    assert decision.approve and out.getvalue().count("Run it? [y/n]") == 3
    assert "plt.plot([1])" in out.getvalue()
    assert not (await ask_on_terminal(_call({"code": "x"}), io.StringIO(), _lines("n\n"))).approve
    at_eof = await ask_on_terminal(_call("not a mapping"), io.StringIO(), _lines(""))
    assert not at_eof.approve and at_eof.reason == "no answer (end of input)"


async def test_line_reader_keeps_typed_ahead_lines_and_ends_at_eof() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"y\nn\npartial")
    os.close(write_fd)
    reader = LineReader(read_fd)
    try:
        assert [await reader.readline() for _ in range(4)] == ["y\n", "n\n", "partial", ""]
    finally:
        os.close(read_fd)


def _cli(out: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "loopwarden.cli", "report", str(_example(out)), "--out", str(out), "--offline",
            "--no-pdf", "--approve-code", *flags]  # fmt: skip


def test_cli_asks_on_the_terminal_approve_one_deny_another(tmp_path: Path) -> None:
    """A real terminal (a pty): the prompt shows each figure's code; we answer y for one, n for the rest."""
    out = tmp_path / "out"
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
    proc = subprocess.Popen(_cli(out), stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    transcript, answered = b"", 0
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 300)
            assert ready, f"the CLI went silent:\n{transcript.decode(errors='replace')[-3000:]}"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            transcript += chunk
            pending = transcript.decode(errors="replace").split("Run it? [y/n]")
            while answered < len(pending) - 1:
                # The code shown before this prompt names the figure it draws.
                answer = b"y\n" if f"({APPROVED})" in pending[answered] else b"n\n"
                os.write(master, answer)
                answered += 1
        code = proc.wait(timeout=300)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = transcript.decode(errors="replace")
    assert code == 0, text[-3000:]
    assert answered >= 2 and "make_figure wants to run model-written code" in text
    assert "denied  make_figure" in text and "denied at the terminal" in text
    assert (out / "figures" / f"{APPROVED}.png").is_file()
    assert not (out / "figures" / f"{DENIED}.png").exists()
    record = json.loads((out / "exploration.json").read_text())
    assert f"make_figure {DENIED}" in record["methodology_notes"]
    assert f"make_figure {APPROVED}" not in record["methodology_notes"]


@pytest.mark.parametrize("json_flag", [True, False])
def test_cli_without_a_terminal_denies_with_a_clear_event(tmp_path: Path, json_flag: bool) -> None:
    out = tmp_path / "out"
    flags = ["--json"] if json_flag else []
    result = subprocess.run(_cli(out, *flags), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Run it?" not in result.stdout
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    decided = [e for e in events if e["type"] == "approval_decided"]
    assert decided and all(not e["approved"] and e["reason"] == NO_TERMINAL for e in decided)
    assert not list((out / "figures").glob("*.png"))
    assert events[-1]["type"] == "report_finished" and events[-1]["status"] == "completed"
    if json_flag:
        assert sum(1 for line in result.stdout.splitlines() if '"approval_decided"' in line) == len(decided)
    else:
        assert "denied  make_figure" in result.stdout


def _default_sigint() -> None:
    """SIGINT as a terminal's foreground job has it: a test runner started in the background by a
    non-interactive shell ignores SIGINT, and its children would inherit that (Ctrl-C never arrives)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_at_the_prompt_cancels_the_run_and_the_log_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        _cli(out), stdin=slave, stdout=slave, stderr=slave, close_fds=True, preexec_fn=_default_sigint
    )
    os.close(slave)
    transcript = b""
    try:
        while b"Run it? [y/n]" not in transcript:
            ready, _, _ = select.select([master], [], [], 300)
            assert ready, transcript.decode(errors="replace")[-2000:]
            transcript += os.read(master, 65536)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C at the prompt delivers
        code = proc.wait(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert code == 130
    last = json.loads((out / "events.jsonl").read_text().splitlines()[-1])
    assert last["type"] == "report_finished" and last["status"] == "cancelled"
