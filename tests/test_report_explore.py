"""The exploration phase: tools on a root, the coverage ledger, the breaker case (a model that
always reads a.txt is cut off and the run goes on), strict mode, and the finish record."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from loopwarden.events import Event, EventStamper, GuardVerdict, PhaseEnded, RunFinished
from loopwarden.models import FunctionModel, ModelRequest, ScriptedModel, call
from loopwarden.models.scripted import ReplyLike
from loopwarden.report.events import ExplorationCutOff, ExplorationDone, IsolationProbed
from loopwarden.report.explore.loop import CUT_OFF_MESSAGE, explore
from loopwarden.report.folder.paths import OUT_OF_BOUNDS
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.record import ExplorationRecord


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.txt").write_text("The pump was run at 3 speeds; flow rose linearly with speed.\n")
    (root / "b.txt").write_text("Peak flow: 12.4 L/min.\n")
    (root / "flow.csv").write_text("speed_rpm,flow_lpm\n100,4.1\n200,8.2\n300,12.4\n")
    (tmp_path / "secret.txt").write_text("outside")
    return root


def run(root: Path, model: Any, **kwargs: Any) -> list[Event]:
    async def collect() -> list[Event]:
        stamper = EventStamper("report-run", start_seq=10)
        out = root.parent / "out"
        return [e async for e in explore(root, out, model, stamper=stamper, scan=scan_folder(root), **kwargs)]

    return asyncio.run(collect())


def record_of(events: list[Event]) -> ExplorationRecord:
    last = events[-1]
    assert isinstance(last, ExplorationDone)
    return last.record


def always_read_a(request: ModelRequest) -> ReplyLike:
    return call("read_file", {"path": "a.txt"})


def test_breaker_case_is_cut_off_and_the_run_goes_on(data: Path) -> None:
    model = FunctionModel(always_read_a, name="collapsing")
    events = run(data, model)
    assert model.calls <= 6
    cut = [e for e in events if isinstance(e, ExplorationCutOff)]
    assert len(cut) == 1 and cut[0].message == CUT_OFF_MESSAGE and cut[0].stop_reason == "repeated_call"
    assert [e.stop_reason for e in events if isinstance(e, PhaseEnded)] == ["repeated_call"]
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.status == "degraded"
    done = events[-1]
    assert isinstance(done, ExplorationDone) and not done.failed
    record = done.record
    assert record.degraded and record.stop_reason == "repeated_call"
    assert record.coverage.entry("a.txt").status == "read"  # type: ignore[union-attr]
    assert record.coverage.entry("flow.csv").status == "unread"  # type: ignore[union-attr]
    assert "stopped" in [e.action for e in events if isinstance(e, GuardVerdict)]
    # Events number within the report run's sequence, after the caller's start_seq.
    assert [e.seq for e in events] == list(range(11, 11 + len(events)))
    assert all(e.run_id == "report-run" for e in events)
    saved = json.loads((data.parent / "out" / "exploration.json").read_text())
    assert saved["degraded"] is True


def test_strict_mode_fails_the_phase(data: Path) -> None:
    events = run(data, FunctionModel(always_read_a), strict=True)
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.status == "failed"
    done = events[-1]
    assert isinstance(done, ExplorationDone) and done.failed
    cut = next(e for e in events if isinstance(e, ExplorationCutOff))
    assert cut.strict and "strict" in cut.message


def test_out_of_bounds_paths_become_results_the_model_can_correct(data: Path) -> None:
    finish = call("finish_exploration", {"experiment": "Pump flow", "goal": "flow vs speed", "key_findings": ["x"]})
    model = ScriptedModel(
        [
            [
                call("read_file", {"path": "../secret.txt"}),
                call("read_file", {"path": "/etc/passwd"}),
                call("list_dir", {"path": ".."}),
                call("read_image", {"path": "a\x00.png"}),
            ],
            call("read_file", {"path": "a.txt"}),
            finish,
        ]
    )
    events = run(data, model)
    results = [e for e in events if e.type == "tool_call_finished"]
    assert [r.ok for r in results[:4]] == [False] * 4  # type: ignore[attr-defined]
    assert all(OUT_OF_BOUNDS in r.message for r in results[:4])  # type: ignore[attr-defined]
    assert results[4].ok  # type: ignore[attr-defined]
    record = record_of(events)
    assert not record.degraded and record.experiment == "Pump flow"
    assert "secret" not in json.dumps(record.model_dump())


def test_finish_exploration_schema_is_enforced(data: Path) -> None:
    model = ScriptedModel(
        [
            call("finish_exploration", {"experiment": "Pump flow", "goal": "flow vs speed"}),  # no key_findings
            call("finish_exploration", {"experiment": "Pump flow", "goal": "g", "key_findings": []}),
            call(
                "finish_exploration",
                {
                    "experiment": "Pump flow test",
                    "goal": "measure flow against speed",
                    "key_findings": ["flow rises linearly, 4.1 to 12.4 L/min"],
                    "assignment_requirements": ["plot flow vs speed"],
                    "methodology_notes": "three speeds",
                    "reference_report": "b.txt",
                },
            ),
        ]
    )
    events = run(data, model)
    results = [e for e in events if e.type == "tool_call_finished"]
    assert [r.ok for r in results] == [False, False, True]  # type: ignore[attr-defined]
    record = record_of(events)
    assert record.key_findings == ["flow rises linearly, 4.1 to 12.4 L/min"]
    assert record.assignment_requirements == ["plot flow vs speed"] and record.reference_report == "b.txt"
    assert not record.offline
    # Nothing was read before finishing: allowed, but the record says so and the run is degraded.
    assert record.stop_reason == "finished_without_reading" and record.degraded
    assert record.unread_at_finish == record.coverage.by_status("unread") != []


def test_coverage_ledger_tracks_partial_and_full_reads(data: Path) -> None:
    (data / "long.md").write_text("".join(f"line {i}: " + "x" * 90 + "\n" for i in range(200)))
    model = ScriptedModel(
        [
            call("read_file", {"path": "long.md"}),
            call("read_file", {"path": "flow.csv"}),
            call("finish_exploration", {"experiment": "e x", "goal": "g x", "key_findings": ["f"]}),
        ]
    )
    record = record_of(run(data, model))
    long = record.coverage.entry("long.md")
    assert long is not None and long.status == "partial" and 0 < long.chars_read < long.total_chars  # type: ignore[operator]
    assert record.coverage.entry("flow.csv").status == "read"  # type: ignore[union-attr]
    assert record.coverage.by_status("unread") == ["a.txt", "b.txt"]
    assert record.tables[0].columns == ["speed_rpm", "flow_lpm"]
    assert record.tables[0].numeric_summary["flow_lpm"]["max"] == pytest.approx(12.4)


def test_isolation_is_probed_and_reported_first(data: Path) -> None:
    events = run(data, FunctionModel(always_read_a))
    probe = events[0]
    assert isinstance(probe, IsolationProbed)
    assert probe.figures_enabled == (probe.layer != "none")
    offered = next(e for e in events if e.type == "run_started").tools  # type: ignore[attr-defined]
    assert ("make_figure" in offered) == probe.figures_enabled


def test_fallback_record_names_what_was_read(data: Path) -> None:
    def read_table_then_loop(request: ModelRequest) -> ReplyLike:
        results = [m for m in request.messages if m["role"] == "tool"]
        return call("read_file", {"path": "flow.csv" if not results else "a.txt"})

    record = record_of(run(data, FunctionModel(read_table_then_loop)))
    assert record.degraded
    joined = " ".join(record.key_findings)
    assert "flow_lpm" in joined and "speed_rpm" in joined and "12.4" in joined


def test_a_text_answer_instead_of_finishing_is_not_the_answer(data: Path) -> None:
    # Text is no answer while finish_exploration is offered and uncalled: the model is reminded,
    # the monologue detector steers, narrows (forces the finishing tool) and stops the phase;
    # the record is degraded and built from what was read.
    model = ScriptedModel([call("read_file", {"path": "flow.csv"})] + ["Flow is proportional to speed."] * 6)
    events = run(data, model)
    record = record_of(events)
    assert record.degraded and record.stop_reason == "monologue"
    forced = [e.tool_choice for e in events if e.type == "model_called"][-1]  # type: ignore[attr-defined]
    assert forced == {"type": "function", "function": {"name": "finish_exploration"}}
    assert any("flow_lpm" in f for f in record.key_findings)


def test_finishing_with_some_files_unread_is_allowed_and_recorded(data: Path) -> None:
    model = ScriptedModel(
        [
            call("read_file", {"path": "a.txt"}),
            call("finish_exploration", {"experiment": "Pump flow test", "goal": "flow", "key_findings": ["x"]}),
        ]
    )
    record = record_of(run(data, model))
    assert record.stop_reason == "terminal_tool" and not record.degraded
    assert "a.txt" not in record.unread_at_finish and record.unread_at_finish
    from loopwarden.report.folder.scan import scan_folder
    from loopwarden.report.templates import load_template
    from loopwarden.report.write.gap import find_gaps
    from loopwarden.report.write.offline_writer import WriterInput, offline_report

    template, scan = load_template("lab"), scan_folder(data)
    gaps = find_gaps(template, record, scan, figures_on=False)
    assert any(g.kind == "coverage" and "when the exploration was finished" in g.message for g in gaps)
    tex = offline_report(WriterInput(template, record, scan, gaps, []))
    assert "explored file by file" not in tex and "figures were made" not in tex
    assert f"1 of {len(record.coverage.files)} file(s) were read in full" in tex
    assert "0 figure(s) were made" in tex
