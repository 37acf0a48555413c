"""Findings computed from data: trends, peaks, half-maximum widths, noise, scaling across runs."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from loopwarden.report.explore.findings import (
    cross_table_findings,
    independent_column,
    section,
    sentence_with,
    table_findings,
    title_of,
)


def gaussian_run(amplitude: float, noise: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.arange(-100, 101, 2.0)
    y = amplitude * np.exp(-(x**2) / (2 * 30.0**2)) + rng.normal(0, noise, x.size)
    return pd.DataFrame({"label": ["r"] * x.size, "x_mm": x, "signal_V": y})


def test_peak_half_maximum_and_scatter_of_a_scan_come_from_the_data() -> None:
    text = " ".join(table_findings("run.csv", gaussian_run(10.0, 0.05, seed=1)))
    assert "read as a scan (readings against x_mm)" in text
    assert "run.csv: peak of signal_V against x_mm = " in text
    fwhm = float(re.search(r"full width at half maximum of the signal_V peak, in units of x_mm = ([\d.]+)\.", text)[1])
    assert fwhm == pytest.approx(2.3548 * 30.0, rel=0.03)  # a Gaussian's FWHM is 2.355 sigma
    scatter = float(
        re.search(r"point-to-point scatter \(noise\) of signal_V along x_mm \(robust [^)]*\) = ([\d.e-]+)\.", text)[1]
    )
    assert 0.05 / 1.5 < scatter < 0.05 * 1.5
    assert "uncertainty" not in text and "per reading" not in text


def test_linear_trend_is_named_with_its_slope() -> None:
    x = np.arange(0, 50.0)
    frame = pd.DataFrame({"t_s": x, "temp_C": 20 + 0.5 * x})
    assert independent_column(frame) == "t_s"
    text = " ".join(table_findings("log.csv", frame))
    assert "log.csv: slope of a straight-line fit of temp_C against t_s = 0.5." in text
    assert "log.csv: correlation (Pearson r) of temp_C with t_s = +1.000." in text
    assert (
        "log.csv, column temp_C (all 50 rows): mean 32.25, standard deviation 7.289, minimum 20, maximum 44.5." in text
    )


def test_runs_with_a_setting_in_their_names_are_compared() -> None:
    frames = {f"data/scan_{a}mA.csv": gaussian_run(a / 100, 0.001, seed=a) for a in (100, 200, 300)}
    found = " ".join(cross_table_findings(frames))
    assert "the maximum signal_V is scan_100mA.csv" in found
    assert "scales linearly with the run setting in the file names (mA)" in found


def test_text_helpers() -> None:
    notes = (
        "# Pendulum timing\n\n## Goal\nThe aim is to measure g\nfrom the period.\n\n"
        "## Tasks\n- plot T^2 vs L\n- fit g\n"
    )
    assert title_of(notes) == "Pendulum timing"
    assert sentence_with(notes, "aim") == "The aim is to measure g from the period."
    assert section(notes, "task") == ["plot T^2 vs L", "fit g"]
    assert title_of("\\title{Hall effect}\n") == "Hall effect"
