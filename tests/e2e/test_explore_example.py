"""End to end: the offline explorer on examples/field-scan, and the seed's breaker case run
through the whole report pipeline (cut off in exploration, the run goes on to writing)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from loopwarden.events import Event, EventStamper
from loopwarden.models import FunctionModel, ModelRequest, call
from loopwarden.models.scripted import ReplyLike
from loopwarden.report.events import ExplorationCutOff, ExplorationDone, IsolationProbed, Milestone, ReportFinished
from loopwarden.report.explore.loop import CUT_OFF_MESSAGE, explore
from loopwarden.report.explore.offline import OfflineExplorer
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.pipeline import ReportConfig, ReportModels, run_report
from loopwarden.report.plan import Toolchain
from loopwarden.report.readers.images import OcrReader

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "field-scan"
COLUMNS = ("position_mm", "field_mT", "temperature_C")


def test_offline_explorer_reads_every_file_and_names_the_real_columns(tmp_path: Path) -> None:
    data = tmp_path / "field-scan"
    shutil.copytree(EXAMPLE, data)
    model = OfflineExplorer()

    async def collect() -> list[Event]:
        scan = scan_folder(data)
        out = tmp_path / "out"
        return [e async for e in explore(data, out, model, stamper=EventStamper("ex"), scan=scan)]

    events = asyncio.run(collect())
    done = events[-1]
    assert isinstance(done, ExplorationDone)
    record = done.record
    assert record.offline and not record.degraded and record.stop_reason == "terminal_tool"
    assert model.calls <= 10

    ledger = {e.path: e for e in record.coverage.files}
    assert set(ledger) == {f.path for f in scan_folder(data).files}
    image = "figures/probe_readout_screenshot.png"
    for path, entry in ledger.items():
        if path == image and not OcrReader.available():
            assert entry.status == "partial" and "no image reader configured" in entry.reason
        else:
            assert entry.status == "read", (path, entry)

    findings = " ".join(record.key_findings)
    for column in COLUMNS:
        assert column in findings
    assert "offline" in record.key_findings[0].lower()
    assert "Hall probe field scan" in record.experiment
    # Computed from the data: the 1500 mA run peaks near the coil centre at ~8.8 mT.
    assert "data/scan_1500mA.csv: peak of field_mT against position_mm = 8.7" in findings
    assert "full width at half maximum of the field_mT peak" in findings, "a scan with one peak gets its width"
    assert "scales linearly" in findings
    assert len(record.assignment_requirements) == 4
    assert {t.path for t in record.tables} == {f"data/scan_{i}mA.csv" for i in (500, 1000, 1500)}
    assert all(t.columns == list(COLUMNS) and t.rows == 41 for t in record.tables)

    probe = next(e for e in events if isinstance(e, IsolationProbed))
    if probe.figures_enabled:
        assert len(record.figures) == 3
        for figure in record.figures:
            assert (tmp_path / "out" / figure.path).read_bytes().startswith(b"\x89PNG")
            assert figure.source_files and figure.source_files[0].startswith("data/scan_")
    if OcrReader.available():
        assert (
            "Hall probe readout"
            in next(e for e in events if e.type == "tool_call_finished" and "OCR" in str(e.preview)).preview
        )  # type: ignore[attr-defined]


def always_read_a(request: ModelRequest) -> ReplyLike:
    return call("read_file", {"path": "a.txt"})


def test_breaker_case_through_the_report_pipeline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("The pump was run at 3 speeds; flow rose linearly with speed.\n")
    (data / "flow.csv").write_text("speed_rpm,flow_lpm\n100,4.1\n200,8.2\n300,12.4\n")
    explorer = FunctionModel(always_read_a, name="collapsing")
    config = ReportConfig(data_dir=data, out_dir=tmp_path / "out")

    async def collect() -> list[Event]:
        models = ReportModels(explorer=explorer)
        no_latex = Toolchain(xelatex=None, bibtex=None, biber=None)
        return [e async for e in run_report(config, models=models, toolchain=no_latex)]

    events = asyncio.run(collect())
    assert explorer.calls <= 6
    cut = next(e for e in events if isinstance(e, ExplorationCutOff))
    assert cut.message == CUT_OFF_MESSAGE
    done_at = next(i for i, e in enumerate(events) if isinstance(e, ExplorationDone))
    later_stages = [e.stage for e in events[done_at:] if isinstance(e, Milestone) and e.state == "started"]
    assert later_stages, "the run must go on to the next phase after the cut-off"
    final = events[-1]
    assert isinstance(final, ReportFinished)
    assert final.status == "degraded"
    assert any("repeated_call" in reason for reason in final.stop_reasons)
    assert (tmp_path / "out" / "report.md").is_file()
