"""Statistics that fit the data's kind, on real public data: the Seattle weather (a daily series
with a yearly cycle, and the same data as a wide monthly table), the Palmer penguins (classes),
and a measured peak (a scan). Every number is checked against plain pandas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from describedcorpus import MONTHS, weather_folder
from loopwarden.report.explore.findings import table_findings
from loopwarden.report.explore.statistics import fact_sentence, table_facts, table_kind

pytest.importorskip("vega_datasets")


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return weather_folder(tmp_path_factory.mktemp("weather"))


def test_a_daily_series_gets_annual_means_and_its_yearly_cycle(weather: Path) -> None:
    frame = pd.read_csv(weather / "seattle-weather.csv")
    assert table_kind(frame) == "time_series"
    facts = {(f.statistic, f.column, f.by): f.value for f in table_facts("w.csv", frame)}
    year = pd.to_datetime(frame["date"]).dt.year
    month = pd.to_datetime(frame["date"]).dt.month
    annual = frame.groupby(year)["temp_max"].mean()
    assert facts[("std_of_annual_means", "temp_max", None)] == pytest.approx(annual.std())
    by_month = frame.groupby(month)["temp_max"].mean()
    hottest = int(by_month.idxmax())
    assert facts[("monthly_mean", "temp_max", f"month={hottest}")] == pytest.approx(by_month.max())
    assert not any(s in ("fwhm", "peak", "scatter") for s, _, _ in facts), "no peak width of a cycle"


def test_a_wide_monthly_table_is_a_cyclic_series_not_a_peak(weather: Path) -> None:
    frame = pd.read_csv(weather / "temp_max_monthly.csv")
    assert table_kind(frame) == "time_series"
    text = " ".join(table_findings("monthly.csv", frame))
    assert "half maximum" not in text and "uncertainty" not in text and "per reading" not in text
    annual = frame[list(MONTHS)].mean(axis=1)
    sentence = "standard deviation of the annual means of JAN..DEC (year-to-year variation) = "
    assert f"{sentence}{annual.std():.4g}." in text


def test_a_table_of_classes_gets_counts_and_means_per_class() -> None:
    pytest.importorskip("palmerpenguins")
    from palmerpenguins import load_penguins

    frame = load_penguins()
    assert table_kind(frame) == "categorical", "a year column does not make classes a time series"
    facts = table_facts("penguins.csv", frame)
    counts = {f.by: f.value for f in facts if f.statistic == "class_count"}
    assert counts == {f"species={k}": float(v) for k, v in frame["species"].value_counts().items()}
    means = {f.by: f.value for f in facts if f.statistic == "class_mean" and f.column == "bill_length_mm"}
    for species, mean in frame.groupby("species")["bill_length_mm"].mean().items():
        assert means[f"species={species}"] == pytest.approx(mean)
    adelie = next(f for f in facts if f.statistic == "class_mean" and f.by == "species=Adelie")
    assert fact_sentence(adelie).startswith("penguins.csv: mean of bill_length_mm for species=Adelie = ")


def test_only_a_scan_with_one_peak_gets_a_width() -> None:
    x = np.arange(-100, 101, 2.0)
    peaked = pd.DataFrame({"x_mm": x, "signal_V": 10 * np.exp(-(x**2) / (2 * 30.0**2))})
    assert table_kind(peaked) == "scan"
    width = next(f.value for f in table_facts("p.csv", peaked) if f.statistic == "fwhm")
    assert width == pytest.approx(2.3548 * 30.0, rel=0.01)
    two = pd.DataFrame({"x_mm": x, "signal_V": np.cos(x / 10) + 1.5})
    assert not [f for f in table_facts("c.csv", two) if f.statistic == "fwhm"], "a repeating profile has no width"
