"""Collapse waste: the same scripted collapsing models in loopwarden and in each peer framework
with its default limits. For every scenario: model calls and tokens spent from the onset of the
loop to the stop, how the run ended, and whether the task's checklist was completed.

    python bench/collapse_waste.py            # prints the table
    python bench/run.py --readme              # both benchmarks, and the README tables updated
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from dataclasses import dataclass

from frameworks import RUNNERS, Outcome
from scenarios import MEASUREMENT_CAP, SCENARIOS, Scenario


@dataclass
class Row:
    scenario: Scenario
    outcome: Outcome | None
    error: str | None = None


async def measure(frameworks: list[str]) -> list[Row]:
    rows = []
    for scenario in SCENARIOS:
        for name in frameworks:
            try:
                rows.append(Row(scenario, await RUNNERS[name](scenario, None)))
            except Exception as error:  # a peer that cannot be driven is reported, not hidden
                rows.append(Row(scenario, None, f"{type(error).__name__}: {error}"[:120]))
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        "| scenario | framework | how it ended | model calls, all | model calls, onset to stop"
        " | tokens, onset to stop | tokens vs loopwarden | checklist done |",
        "|---|---|---|---:|---:|---:|---:|:---:|",
    ]
    baseline = {
        r.scenario.name: r.outcome.meter.waste()[1] for r in rows if r.outcome and r.outcome.framework == "loopwarden"
    }
    for r in rows:
        if r.outcome is None:
            lines.append(f"| {r.scenario.title} | ? | could not run: {r.error} | | | | | |")
            continue
        calls, tokens = r.outcome.meter.waste()
        at_least = ">= " if r.outcome.meter.capped else ""
        base = baseline.get(r.scenario.name)
        ratio = f"{at_least}{tokens / base:.1f}x" if base else "-"
        done = "yes" if r.scenario.completed(r.outcome.world) else "no"
        lines.append(
            f"| {r.scenario.title} | {r.outcome.framework} | {r.outcome.ended} | {at_least}{r.outcome.meter.calls} | "
            f"{at_least}{calls} | {at_least}{tokens:,} | {ratio} | {done} |"
        )
    return "\n".join(lines)


def notes() -> str:
    return (
        "Tokens are metered identically for every framework by the scripted model: characters of what the "
        "framework sent that a model reads (system prompt, roles, text, tool names and arguments; not ids or "
        "timestamps) / 4, plus 20 output tokens per call. Runs a framework had not stopped after "
        f"{MEASUREMENT_CAP} model calls were ended by the benchmark and show `>=`."
    )


def main() -> int:
    warnings.simplefilter("ignore")
    frameworks = [n for n in RUNNERS if len(sys.argv) < 2 or n in sys.argv[1:]]
    rows = asyncio.run(measure(frameworks))
    print(table(rows))
    print()
    print(notes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
