"""Shared pieces for the report-writing tests: a small real data folder, an exploration record
that describes it, and a helper that runs the pipeline and collects its events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loopwarden.events import Event
from loopwarden.report.events import Milestone, ReportFinished
from loopwarden.report.pipeline import ReportConfig, ReportModels, run_report
from loopwarden.report.plan import Toolchain, probe_toolchain
from loopwarden.report.record import CoverageEntry, CoverageLedger, ExplorationRecord, FigureRecord, TableProfile

NO_LATEX = Toolchain(None, None, None)
COLUMNS = ["site_id", "soil_temp_c", "moisture_pct", "ph"]


def make_folder(root: Path) -> Path:
    data = root / "data"
    data.mkdir(parents=True)
    rows = ["A1,12.5,31.2,6.8", "A2,13.1,29.8,6.5", "B1,11.9,35.0,7.1"]
    (data / "field_scan.csv").write_text(",".join(COLUMNS) + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    (data / "protocol.md").write_text(
        "# Soil sensor field protocol\nAuthor: Jane Smith\nPublished 2024, doi 10.1234/soil.2024.001\n",
        encoding="utf-8",
    )
    return data


def make_record(*, figure: Path | None = None, findings: list[str] | None = None) -> ExplorationRecord:
    figures = []
    if figure is not None:
        figures.append(
            FigureRecord(path="figures/temp.png", caption="Soil temperature by site", source_files=["field_scan.csv"])
        )
    return ExplorationRecord(
        experiment="Soil field scan",
        goal="Characterise soil temperature and moisture across sites",
        key_findings=findings if findings is not None else ["Soil temperature ranges from 11.9 to 13.1 C"],
        figures=figures,
        tables=[
            TableProfile(
                path="field_scan.csv",
                rows=3,
                columns=COLUMNS,
                numeric_summary={"soil_temp_c": {"count": 3, "mean": 12.5, "std": 0.6, "min": 11.9, "max": 13.1}},
            )
        ],
        coverage=CoverageLedger(
            files=[
                CoverageEntry(path="field_scan.csv", status="read", chars_read=80, total_chars=80),
                CoverageEntry(path="protocol.md", status="read", chars_read=90, total_chars=90),
            ]
        ),
        offline=True,
    )


def write_png(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(["A1", "A2", "B1"], [12.5, 13.1, 11.9])
    fig.savefig(path)
    plt.close(fig)
    return path


async def collect(
    tmp_path: Path,
    *,
    template: str = "lab",
    writer: Any = None,
    record: ExplorationRecord | None = None,
    toolchain: Toolchain | None = NO_LATEX,
    strict: bool = False,
    lang: str = "en",
    **config: Any,
) -> list[Event]:
    data = tmp_path / "data" if (tmp_path / "data").is_dir() else make_folder(tmp_path)
    cfg = ReportConfig(data_dir=data, out_dir=tmp_path / "out", template=template, strict=strict, lang=lang, **config)  # type: ignore[arg-type]
    models = ReportModels(writer=writer)
    chain = toolchain if toolchain is not None else probe_toolchain()
    return [e async for e in run_report(cfg, models=models, exploration=record or make_record(), toolchain=chain)]


def explore_offline(data: Path, out: Path) -> ExplorationRecord:
    """A real offline exploration of `data` (the deterministic explorer, real tools and readers)."""
    import asyncio

    from loopwarden.events import EventStamper
    from loopwarden.report.events import ExplorationDone
    from loopwarden.report.explore.loop import explore
    from loopwarden.report.explore.offline import OfflineExplorer
    from loopwarden.report.folder.scan import scan_folder

    async def run() -> list[Event]:
        stamper = EventStamper("offline")
        return [e async for e in explore(data, out, OfflineExplorer(), stamper=stamper, scan=scan_folder(data))]

    done = asyncio.run(run())[-1]
    assert isinstance(done, ExplorationDone)
    return done.record


def milestones(events: list[Event]) -> list[Milestone]:
    return [e for e in events if isinstance(e, Milestone)]


def finished(events: list[Event]) -> ReportFinished:
    last = events[-1]
    assert isinstance(last, ReportFinished)
    return last


def terminal_states(events: list[Event]) -> list[tuple[int, str, str]]:
    """(index, stage, state) of each milestone's ending: done or skipped."""
    return [(m.index, m.stage, m.state) for m in milestones(events) if m.state != "started"]
