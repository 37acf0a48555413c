"""Reading real public tables saved in awkward dialects (tests/tablecorpus.py): every column is
found with its expected name, the profile says what was detected, and the statistics are those
of the package's own data."""

from __future__ import annotations

import math
from importlib.util import find_spec
from pathlib import Path

import pytest

import tablecorpus
from loopwarden.report.folder.paths import PathGuard
from loopwarden.report.readers import FileReader

# Looked up, not imported: importing scikit-learn alone cost ~7 s of every xdist worker's collection.
for package in ("palmerpenguins", "vega_datasets", "sklearn"):
    if find_spec(package) is None:
        reason = f"{package}: the corpus extra (pip install -e '.[corpus]') is not installed"
        pytest.skip(reason, allow_module_level=True)

CASE_NAMES = (
    "sklearn-wine",
    "sklearn-iris",
    "sklearn-breast-cancer",
    "penguins-space",
    "penguins-semicolon",
    "weather-tab-in-csv",
    "weather-comments",
    "weather-units-row",
    "penguins-units-bracketed",
    "penguins-headerless",
    "penguins-decimal-comma",
    "penguins-raw-quoted-newlines",
    "weather-bom",
    "weather-latin1",
    "weather-mixed-encodings",
)
"""tablecorpus.cases() by name, for collection: building the cases loads three packages' datasets
(scikit-learn's import alone ~7 s), which a worker that runs none of these tests never needs.
test_every_case_of_the_corpus_is_collected checks that the two agree."""


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tablecorpus.Case]]:
    folder = tmp_path_factory.mktemp("corpus")
    return folder, {case.name: case for case, _ in tablecorpus.write_corpus(folder)}


@pytest.fixture(scope="module")
def corpus(written: tuple[Path, dict[str, tablecorpus.Case]]) -> Path:
    return written[0]


def test_every_case_of_the_corpus_is_collected(written: tuple[Path, dict[str, tablecorpus.Case]]) -> None:
    assert tuple(written[1]) == CASE_NAMES


@pytest.mark.parametrize("name", CASE_NAMES)
def test_each_dialect_is_read_with_its_columns(name: str, written: tuple[Path, dict[str, tablecorpus.Case]]) -> None:
    corpus, case = written[0], written[1][name]
    outcome = FileReader(PathGuard(corpus)).read(case.filename)
    assert outcome.mode == "table", outcome.text[:300]
    profile = outcome.tables[0]
    assert profile.columns == case.columns
    assert profile.rows == case.rows and profile.complete
    assert profile.dialect["delimiter"] == case.delimiter
    assert profile.dialect["header"] is case.header
    assert len(profile.dialect["skipped_lines"]) == case.preamble
    assert profile.dialect["decimal"] == case.decimal
    assert profile.units == case.units
    for column, mean in case.means.items():
        assert profile.numeric_summary[column]["mean"] == pytest.approx(mean, rel=1e-9), column
    # What was detected is said in the text the model reads.
    first = outcome.text.splitlines()[0]
    assert {",": "','", ";": "';'", "\t": "tab", " ": "space"}[case.delimiter] in first
    assert ("no header row (names generated)" in first) is (not case.header)
    if case.preamble:
        assert f"{case.preamble} line(s) skipped above the table" in first


def test_a_metadata_first_row_is_named_not_dropped(corpus: Path) -> None:
    outcome = FileReader(PathGuard(corpus)).read("wine_data.csv")
    profile = outcome.tables[0]
    assert len(profile.columns) == 14
    assert any("178,13,class_0,class_1,class_2" in note and "metadata" in note for note in profile.notes)
    assert "metadata, not a header" in outcome.text


def test_a_short_header_is_reported_and_every_column_kept(tmp_path: Path) -> None:
    rows = tablecorpus._sklearn_file("wine_data.csv").read_text().splitlines()[1:]
    (tmp_path / "wine.csv").write_text("alcohol,malic_acid,ash,alcalinity,magnesium\n" + "\n".join(rows) + "\n")
    outcome = FileReader(PathGuard(tmp_path)).read("wine.csv")
    profile = outcome.tables[0]
    assert len(profile.columns) == 14 and profile.rows == 178
    assert any("5 field(s) where the rows have 14" in note for note in profile.notes)


def test_latin1_and_mixed_files_keep_their_degree_signs(corpus: Path) -> None:
    reader = FileReader(PathGuard(corpus))
    latin = reader.read("weather_latin1.csv").tables[0]
    assert latin.dialect["encoding"] == "Windows-1252" and "temp_max (°C)" in latin.columns
    mixed = reader.read("weather_mixed.csv")
    assert mixed.tables[0].dialect["encoding"] == "UTF-8 with some Windows-1252 bytes"
    table = reader.table("weather_mixed.csv")
    assert table is not None
    assert any("±" in str(v) for v in table.frames["weather_mixed.csv"]["weather"])


def test_duckdb_and_pandas_compute_the_same_statistics(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb")
    from loopwarden.report.readers import profile as profile_module

    by_engine = {}
    for threshold, engine in ((0, "duckdb"), (1 << 40, "pandas")):
        monkeypatch.setattr(profile_module, "DUCKDB_MIN_BYTES", threshold)
        for name in ("penguins_eu.csv", "penguins_raw.csv", "weather_units.csv", "measurements.csv"):
            profile = FileReader(PathGuard(corpus)).read(name).tables[0]
            assert profile.engine == engine
            by_engine[(engine, name)] = profile
    for name in ("penguins_eu.csv", "penguins_raw.csv", "weather_units.csv", "measurements.csv"):
        duck, pand = by_engine[("duckdb", name)], by_engine[("pandas", name)]
        assert duck.rows == pand.rows
        assert duck.numeric_summary.keys() == pand.numeric_summary.keys()
        for column, stats in duck.numeric_summary.items():
            for key, value in stats.items():
                assert math.isclose(value, pand.numeric_summary[column][key], rel_tol=1e-9), (name, column, key)
