"""The gap check: template and assignment requirements against what was found."""

from __future__ import annotations

from pathlib import Path

from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.record import CoverageEntry, CoverageLedger, ExplorationRecord
from loopwarden.report.templates import load_template
from loopwarden.report.write.gap import find_gaps, has_material
from reportkit import make_folder, make_record


def test_missing_figures_requirements_and_unread_files_are_gaps(tmp_path: Path) -> None:
    scan = scan_folder(make_folder(tmp_path))
    record = make_record().model_copy(
        update={
            "assignment_requirements": [
                "Report the soil temperature range across sites.",
                "Estimate the measurement uncertainty from repeated readings.",
            ],
            "coverage": CoverageLedger(files=[CoverageEntry(path="big.pdf", status="skipped", reason="too large")]),
        }
    )
    gaps = find_gaps(load_template("lab"), record, scan, figures_on=True)
    kinds = {g.kind: g for g in gaps}
    assert "figures" in kinds and "exploration made 0" in kinds["figures"].message
    requirement_gaps = [g.requirement for g in gaps if g.kind == "requirement"]
    assert requirement_gaps == ["Estimate the measurement uncertainty from repeated readings."]
    assert "big.pdf" in kinds["coverage"].message


def test_sections_without_material_are_gaps(tmp_path: Path) -> None:
    scan = scan_folder(make_folder(tmp_path))
    bare = ExplorationRecord(experiment="Unknown", goal="", key_findings=[])
    gaps = find_gaps(load_template("lab"), bare, scan, figures_on=False)
    sections = {g.requirement for g in gaps if g.kind == "section"}
    assert {"introduction", "results", "discussion", "conclusion"} <= sections
    assert "data" not in sections, "the folder has files"


def test_nothing_to_check_means_no_material() -> None:
    template = load_template("brief")
    bare_template = template.model_copy(
        update={"sections": [s.model_copy(update={"needs": []}) for s in template.sections]}
    )
    record = ExplorationRecord(experiment="x", goal="y", key_findings=[])
    assert not has_material(bare_template, record)
    assert has_material(bare_template, record.model_copy(update={"assignment_requirements": ["Plot it"]}))
    assert has_material(load_template("lab"), record)
