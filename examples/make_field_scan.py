"""Generate examples/field-scan/: a small synthetic field-scan experiment (a Hall probe moved
along the axis of a solenoid at three coil currents). Deterministic; rerun to regenerate.

    python examples/make_field_scan.py
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

OUT = Path(__file__).parent / "field-scan"
MU0 = 4e-7 * math.pi
TURNS, LENGTH_M, RADIUS_M = 500, 0.100, 0.020
CURRENTS_MA = (500, 1000, 1500)
POSITIONS_MM = np.arange(-100, 101, 5)

NOTES = """# Hall probe field scan of a finite solenoid

## Goal
The goal is to map the magnetic field on the axis of a solenoid and check that it scales linearly
with the coil current, as the Biot-Savart law predicts for a finite coil.

## Method
A Hall probe on a linear stage was moved along the coil axis from -100 mm to +100 mm in 5 mm steps.
At each position the field was read after 2 s of settling. The scan was repeated at three coil currents
(500 mA, 1000 mA, 1500 mA). The probe temperature was logged because the Hall sensor drifts with temperature.
The screenshot in figures/ is the readout at the coil centre during the 1000 mA run.

## Assignment
- Plot the field profile for each current and compare it with the theoretical on-axis field.
- Report the field at the centre and how it scales with the current.
- Discuss the end effects (field at the coil ends is about half the centre value).
- Estimate the measurement uncertainty from the noise in the data.
"""

PARAMETERS = f"""# Apparatus and run parameters
coil:
  turns: {TURNS}
  length_mm: {LENGTH_M * 1000:.0f}
  radius_mm: {RADIUS_M * 1000:.0f}
probe:
  model: HP-200 Hall probe
  sensitivity_mV_per_mT: 5.0
  settle_s: 2
scan:
  start_mm: -100
  stop_mm: 100
  step_mm: 5
currents_mA: [{", ".join(str(c) for c in CURRENTS_MA)}]
"""


def on_axis_field_mT(x_mm: np.ndarray, current_a: float) -> np.ndarray:
    x = x_mm / 1000
    half = LENGTH_M / 2
    scale = MU0 * TURNS * current_a / (2 * LENGTH_M)
    return (
        1000
        * scale
        * ((x + half) / np.sqrt((x + half) ** 2 + RADIUS_M**2) - (x - half) / np.sqrt((x - half) ** 2 + RADIUS_M**2))
    )


def write_scan(rng: np.random.Generator, current_ma: int) -> np.ndarray:
    field = on_axis_field_mT(POSITIONS_MM, current_ma / 1000) + rng.normal(0, 0.02, POSITIONS_MM.size)
    temperature = 22.0 + 0.004 * current_ma / 1000 * np.arange(POSITIONS_MM.size) + rng.normal(0, 0.02, field.size)
    lines = [
        f"# Hall probe scan along the coil axis, coil current {current_ma} mA",
        "position_mm,field_mT,temperature_C",
    ]
    lines += [f"{x},{b:.4f},{t:.2f}" for x, b, t in zip(POSITIONS_MM, field, temperature, strict=True)]
    (OUT / "data" / f"scan_{current_ma}mA.csv").write_text("\n".join(lines) + "\n")
    return field


def write_screenshot(field_1a: np.ndarray) -> None:
    centre = float(field_1a[POSITIONS_MM.size // 2])
    fig = plt.figure(figsize=(4.0, 2.2), dpi=80)
    fig.patch.set_facecolor("white")
    fig.text(0.05, 0.78, "Hall probe readout", fontsize=15)
    fig.text(0.05, 0.50, f"B = {centre:.2f} mT", fontsize=15)
    fig.text(0.05, 0.22, "I = 1000 mA   x = 0 mm", fontsize=15)
    fig.savefig(OUT / "figures" / "probe_readout_screenshot.png")
    plt.close(fig)


def main() -> None:
    for folder in ("data", "figures"):
        (OUT / folder).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261129)
    fields = {current: write_scan(rng, current) for current in CURRENTS_MA}
    (OUT / "notes.md").write_text(NOTES)
    (OUT / "parameters.yaml").write_text(PARAMETERS)
    write_screenshot(fields[1000])


if __name__ == "__main__":
    main()
