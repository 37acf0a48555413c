"""A table whose statistics cannot be computed never ends a run: it keeps its row count, and the
failure is said in the coverage ledger, the record, the gaps and the findings. Month names in a
year + month table are months, and a month outside 1..12 is left out instead of crashing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from loopwarden.report.explore import statistics
from loopwarden.report.explore.findings import cross_table_findings, table_findings
from loopwarden.report.explore.statistics import checked_facts, fact_sentence, table_facts
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.readers.tables import read_excel
from loopwarden.report.templates import load_template
from loopwarden.report.write.gap import find_gaps, has_material
from reportkit import explore_offline

HOSTILE = {
    "duplicate names": pd.DataFrame([[1, 2, 3], [4, 5, 6], [7, 8, 10]], columns=["t", "t", "u"]),
    "cells holding lists": pd.DataFrame({"c": [[1], [2]] * 5, "v": range(10)}),
    "names that are not text": pd.DataFrame({0: [1, 2, 3, 4, 5], 1: [2, 3, 4, 5, 7]}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_table_keeps_its_rows_and_says_what_failed(name: str) -> None:
    frame = HOSTILE[name]
    with pytest.raises(Exception):  # noqa: B017 - the point: table_facts alone would end the run
        table_facts("h.csv", frame)
    facts, failed = checked_facts("h.csv", frame)
    assert [(f.statistic, f.value) for f in facts] == [("rows", float(len(frame)))]
    assert failed is not None and ":" in failed
    said = table_findings("h.csv", frame)
    assert "its statistics could not be computed" in said[0] and failed in said[0]
    assert said[1] == f"h.csv: {len(frame)} rows (all {len(frame)} rows)."
    cross_table_findings({"a.csv": frame, "b.csv": frame.copy()})  # runs of a hostile table: no crash


def test_month_names_are_months_and_impossible_months_are_left_out() -> None:
    names = pd.DataFrame({"year": [2001] * 6 + [2002] * 6, "month": ["Jan", "Feb", "Mar", "Apr", "May", "June"] * 2,
                          "rain": np.arange(12.0)})  # fmt: skip
    monthly = {f.by: f.value for f in table_facts("m.csv", names) if f.statistic == "monthly_mean"}
    assert monthly == {"month=6": pytest.approx((5 + 11) / 2), "month=1": pytest.approx((0 + 6) / 2)}
    odd = pd.DataFrame({"year": [2001, 2001, 2002, 2002, 2003, 2003] * 2, "month": [1, 13, 2, 14, 3, 15] * 2,
                        "v": np.arange(12.0)})  # fmt: skip
    sentences = [fact_sentence(f) for f in table_facts("o.csv", odd)]  # month 13 once raised IndexError
    assert not any("month=13" in s for s in sentences)


def test_a_workbook_with_two_columns_named_alike_is_read_with_both(tmp_path: Path) -> None:
    pytest.importorskip("openpyxl")
    path = tmp_path / "w.xlsx"
    pd.DataFrame({"t": [1.0, 2.0, 3.0], "t ": [4.0, 5.0, 7.0]}).to_excel(path, index=False)
    with path.open("rb") as f:
        read = read_excel(f, "w.xlsx")
    assert read.profiles[0].columns == ["t", "t_2"]
    assert read.profiles[0].numeric_summary["t_2"]["max"] == 7.0


def test_a_run_goes_on_when_one_tables_statistics_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real offline exploration of two real CSVs; the statistics of one table raise (as an
    unforeseen table might): the run finishes, and every place a user looks says so."""
    data = tmp_path / "data"
    data.mkdir()
    x = np.arange(0, 40.0)
    pd.DataFrame({"x_mm": x, "signal_V": 3 * x + 1}).to_csv(data / "good.csv", index=False)
    pd.DataFrame({"x_mm": x, "odd": np.sin(x)}).to_csv(data / "hostile.csv", index=False)
    real_kind = statistics.table_kind

    def failing_kind(frame: pd.DataFrame) -> statistics.TableKind:
        if "odd" in frame.columns:
            raise ZeroDivisionError("float division by zero")
        return real_kind(frame)

    monkeypatch.setattr(statistics, "table_kind", failing_kind)
    record = explore_offline(data, tmp_path / "out")
    assert record.statistics_failed == {"hostile.csv": "ZeroDivisionError: float division by zero"}
    assert {f.statistic for f in record.facts if f.path == "hostile.csv"} == {"rows"}
    assert any(f.statistic == "slope" for f in record.facts if f.path == "good.csv"), "the other table is whole"
    coverage = {e.path: e for e in record.coverage.files}
    assert coverage["hostile.csv"].status == "partial"
    assert "statistics could not be computed (ZeroDivisionError" in coverage["hostile.csv"].reason
    assert coverage["good.csv"].status == "read"
    assert any("hostile.csv: columns x_mm, odd; its statistics could not be computed" in k for k in record.key_findings)
    template = load_template("lab")
    assert has_material(template, record)
    gaps = find_gaps(template, record, scan_folder(data), figures_on=False)
    assert [g.message for g in gaps if g.kind == "statistics"] == [
        "the statistics of hostile.csv could not be computed (ZeroDivisionError: float division by zero)"
    ]
