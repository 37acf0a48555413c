"""Big and odd folders: similar files are explored through samples and reported as groups; a file
name that is not UTF-8 travels through events, JSON, LaTeX and Markdown; what was skipped for
safety, binary or not read is in the report's coverage section and in the run's last event."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rich.console import Console

from loopwarden.report.cli import summary
from loopwarden.report.events import ReportFinished
from loopwarden.report.folder.groups import group_files, pattern_of
from loopwarden.report.folder.paths import PathGuard, real_name, shown_name
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.pipeline import ReportConfig, run_report
from reportkit import NO_LATEX

BAD = b"caf\xe9_\xff.csv"


def make_campaign(root: Path, days: int = 70) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("# Soil moisture campaign\n\n## Goal\nThe goal is to measure soil moisture.\n")
    for day in range(days):
        folder = root / "logs" / f"day_{day:03d}"
        folder.mkdir(parents=True)
        for station in range(3):
            rows = "\n".join(f"{h},{20 + station + h / 10:.2f}" for h in range(6))
            (folder / f"station_{station}.csv").write_text(f"hour,moisture_pct\n{rows}\n")
    with open(os.fsencode(root / "logs") + b"/" + BAD, "wb") as f:
        f.write(b"hour,moisture_pct\n0,31.5\n1,31.2\n")
    (root / "blob.bin").write_bytes(bytes(range(256)) * 8)
    os.symlink("/etc/hostname", root / "outside.csv")
    return root


async def run(data: Path, out: Path) -> list[object]:
    config = ReportConfig(data_dir=data, out_dir=out, pdf=False)
    return [e async for e in run_report(config, toolchain=NO_LATEX)]


def test_shown_names_are_text_and_lead_back_to_the_file(tmp_path: Path) -> None:
    make_campaign(tmp_path)
    name = shown_name(os.fsdecode(BAD))
    assert name == "caf\\xe9_\\xff.csv"
    assert real_name(name) == os.fsdecode(BAD)
    scan = scan_folder(tmp_path)
    assert f"logs/{name}" in scan.files.paths()
    json.dumps(scan.model_dump(mode="json"))  # surrogates would raise here
    guard = PathGuard(tmp_path)
    fd = guard.open_file(f"logs/{name}")
    os.close(fd)
    assert guard.relative(f"logs/{name}") == f"logs/{name}"


def test_similar_files_form_groups_with_samples(tmp_path: Path) -> None:
    scan = scan_folder(make_campaign(tmp_path))
    groups = {g.pattern: g for g in group_files(scan)}
    stations = groups["logs/day_#/station_#.csv"]
    assert len(stations.paths) == 210 and stations.grouped
    assert stations.samples == [
        "logs/day_000/station_0.csv",
        "logs/day_035/station_0.csv",
        "logs/day_069/station_2.csv",
    ]
    small = {g.pattern: g for g in group_files(scan_folder(make_campaign(tmp_path / "small", days=10)))}
    assert all(not g.grouped for g in small.values())  # a small folder is read file by file
    assert not groups["README.md"].grouped
    assert pattern_of("a/run12_v3.csv") == "a/run#_v#.csv"


async def test_a_big_folder_reads_samples_and_reports_everything(tmp_path: Path) -> None:
    data = make_campaign(tmp_path / "data")
    events = await run(data, tmp_path / "out")
    last = events[-1]
    assert isinstance(last, ReportFinished) and last.status in ("completed", "degraded"), last
    # Every event is valid JSON text (the non-UTF-8 name included).
    log = (tmp_path / "out" / "events.jsonl").read_text(encoding="utf-8")
    assert "caf\\\\xe9_\\\\xff.csv" in log
    record = json.loads((tmp_path / "out" / "exploration.json").read_text(encoding="utf-8"))
    assert [g["pattern"] for g in record["groups"]] == ["logs/day_#/station_#.csv"]
    read = {e["path"] for e in record["coverage"]["files"] if e["status"] == "read"}
    assert {"logs/day_000/station_0.csv", "logs/day_069/station_2.csv", "logs/caf\\xe9_\\xff.csv"} <= read
    assert "logs/day_003/station_1.csv" not in read
    member = next(e for e in record["coverage"]["files"] if e["path"] == "logs/day_003/station_1.csv")
    assert member["reason"].startswith("not read: one of 210 files like logs/day_#/station_#.csv")
    # The coverage section and the summary name what was not read and why.
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    tex = (tmp_path / "out" / "report.tex").read_text(encoding="utf-8")
    for text in (md, "\n".join(last.coverage_notes)):
        assert "blob.bin" in text and "binary" in text
        assert "outside.csv" in text and "symlink pointing outside the folder" in text
        assert "logs/day_#/station_#.csv" in text
    assert "caf\\textbackslash{}xe9" in tex
    assert "| `logs/day_#/station_#.csv` | group | 3 of 210 files |" in md
    console = Console(record=True, width=200)
    console.print(summary(last, tmp_path / "out"))
    printed = console.export_text()
    assert "outside.csv: skipped" in printed and "blob.bin: skipped" in printed
