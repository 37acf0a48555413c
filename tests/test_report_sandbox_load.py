"""Figure code reads a table as its profile did: `load(path)` in the sandbox gets the dialect the
reader detected (lines above the table, delimiter, decimal comma, units row, the names a
description gave), so a figure is drawn from the same columns the statistics are about. And a
table of classes is drawn as one box per class, never as a line through the classes."""

from __future__ import annotations

import asyncio
from importlib.util import find_spec
from pathlib import Path

import pytest

from describedcorpus import EXPECTED_COLUMNS, penguins_folder, sklearn_folder
from loopwarden.report.folder.paths import PathGuard
from loopwarden.report.readers import FileReader
from loopwarden.report.readers.tables import read_spec
from loopwarden.report.sandbox.isolation import probe_isolation
from loopwarden.report.sandbox.runner import FigureSandbox, Limits
from reportkit import explore_offline

ISOLATION = probe_isolation()
pytestmark = pytest.mark.skipif(not ISOLATION.isolated, reason="no OS isolation layer on this machine")


def test_load_reads_a_table_as_its_profile_did(tmp_path: Path) -> None:
    if find_spec("sklearn") is None:  # looked up, not imported (describedcorpus.sklearn_datasets)
        pytest.skip("scikit-learn is not installed")
    data = sklearn_folder(tmp_path / "data", ("iris",))
    # A logger export: a comment, a semicolon delimiter, a units row, decimal commas.
    (data / "logger.csv").write_text("# station 4\ntime;temp\ns;°C\n0;20,5\n60;21,25\n120;22,0\n", encoding="utf-8")
    reader = FileReader(PathGuard(data))
    profiles = {p: reader.read(p).tables[0] for p in ("iris.csv", "logger.csv")}
    tables = {p: spec for p, profile in profiles.items() if (spec := read_spec(profile)) is not None}
    names = EXPECTED_COLUMNS["iris.csv"]
    code = (
        "df = load('iris.csv')\n"
        f"assert list(df.columns) == {names!r}, list(df.columns)\n"
        "assert len(df) == 150 and df['sepal length'].iloc[0] == 5.1 and df['class'].nunique() == 3, df.head()\n"
        "assert len(load('iris.csv', every=10)) == 15\n"
        "log = load('logger.csv')\n"
        "assert list(log.columns) == ['time', 'temp'] and list(log['temp']) == [20.5, 21.25, 22.0], log\n"
        "plt.plot(df['sepal length'], df['petal length'], 'o')"
    )
    box = FigureSandbox(data, tmp_path / "out", ISOLATION, limits=Limits(wall_seconds=60, cpu_seconds=30))
    outcome = asyncio.run(box.run(code, "iris", tables))
    assert outcome.ok, outcome.message
    # Without the profile's reading, the metadata row would be the header: the same code fails.
    assert not asyncio.run(box.run(code, "iris_raw")).ok


def test_a_table_of_classes_is_drawn_one_box_per_class(tmp_path: Path) -> None:
    pytest.importorskip("palmerpenguins")
    record = explore_offline(penguins_folder(tmp_path / "data"), tmp_path / "out")
    [figure] = record.figures
    assert figure.caption.startswith("bill_length_mm, bill_depth_mm, flipper_length_mm, body_mass_g by species")
    assert "one box per class" in figure.caption and ".boxplot(" in figure.code
    assert (tmp_path / "out" / figure.path).is_file()
