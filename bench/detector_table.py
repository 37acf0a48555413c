"""The guard per detector over eval cases: loop cases it caught, the turn of its first intervention
on them (median and worst), and false interventions (healthy cases it stepped in on); then which
cases still fail and why. With --readme, the output replaces the README block between the
`<!-- bench:detectors:start/end -->` markers, so the README shows what this command printed.

    python bench/detector_table.py evals/ --readme

A turn is one model call, numbered from 1. A loop case counts for every detector that stepped in
on it, so the per-detector counts add up to more than the loops caught.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path

from readme_blocks import write_blocks

from loopwarden.eval.suite import EvalReport, run_suite

PUBLIC = "public"
"""The sub-folder holding the cases reconstructed from public issue threads."""


def _turn(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def detector_rows(report: EvalReport) -> str:
    suite = report.suite
    lines = [
        "| detector | loops caught | first turn, median | first turn, worst | false interventions |",
        "|---|---:|---:|---:|---:|",
    ]
    for d in suite.detectors:
        lines.append(
            f"| `{d.detector}` | {d.loops_caught} | {_turn(d.first_turn_median)} | {_turn(d.first_turn_worst)}"
            f" | {d.false_interventions} |"
        )
    return "\n".join(lines)


def summary(report: EvalReport) -> str:
    suite = report.suite
    public = [c for c in report.cases if c.path and f"/{PUBLIC}/" in f"/{c.path}"]
    lines = [
        f"{suite.cases} cases ({len(public)} reconstructed from public issue threads, in `evals/{PUBLIC}/`):"
        f" {suite.loops_caught}/{suite.loop_cases} loop cases stopped or steered;"
        f" {suite.false_interventions}/{suite.healthy_cases} healthy cases intervened on"
        + (f" ({', '.join(suite.false_intervention_cases)})" if suite.false_intervention_cases else "")
        + f"; {report.passed}/{len(report.cases)} cases meet all their expectations.",
    ]
    failed = sorted(report.failed, key=lambda c: c.name)
    if failed:
        lines += ["", "Still failing:", ""]
        lines += [f"- `{c.name}`: {'; '.join(c.reasons)}" for c in failed]
    return "\n".join(lines)


def render(report: EvalReport) -> str:
    return f"{detector_rows(report)}\n\n{summary(report)}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("paths", nargs="*", type=Path, default=[Path(__file__).resolve().parents[1] / "evals"])
    parser.add_argument("--readme", action="store_true", help="also write the table into README.md")
    args = parser.parse_args(argv)
    block = render(asyncio.run(run_suite(args.paths)))
    print(block)
    if args.readme:
        write_blocks({"detectors": block})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
