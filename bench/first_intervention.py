"""Turn of the guard's first intervention per eval case, and a comparison with a saved run, so a
change to the guard can be shown to step in no later than before (and never on healthy cases).

    python bench/first_intervention.py evals/ --save before.json      # on the old code
    python bench/first_intervention.py evals/ --against before.json   # on the new code

It runs the cases with whatever `loopwarden` is importable. Case fields an older runtime does
not know (newer expectations, case kinds, model reactions) are dropped before loading there, so
the same folder can be measured on both sides. A turn is one model call, numbered from 1; an
intervention is any guard verdict other than `allow` and `cached` (refusals of malformed calls
aside), or a stop of the phase by a guard or a budget.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from loopwarden.eval.case import Case, ModelSpec, ToolSpec, collect_case_files
from loopwarden.eval.runner import build_agent
from loopwarden.events import Event, GuardVerdict, ModelCalled, PhaseEnded

CALL_REFUSALS = {"schema", "unknown_tool", "permission", "slots"}
NOT_GUARD_STOPS = {"approval_required", "model_error"}
NOT_INTERVENTIONS = {"allow", "allowed", "cached", "paused"}  # v0 and v1 verdict names


def _known(data: dict[str, Any], model: type[Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k in model.model_fields}


def load(path: Path) -> Case:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.setdefault("name", path.stem)
    data = _known(data, Case)
    data["expect"] = {}
    data["model"] = _known(data["model"], ModelSpec)
    data["tools"] = [_known(t, ToolSpec) for t in data.get("tools", [])]
    case = Case.model_validate(data)
    case.path = path
    return case


def first_intervention(events: list[Event]) -> int | None:
    turn = 0
    for e in events:
        if isinstance(e, ModelCalled):
            turn = e.turn
        elif isinstance(e, GuardVerdict) and e.action not in NOT_INTERVENTIONS:
            if not (e.action == "refused" and e.detector in CALL_REFUSALS):
                return e.turn or turn
        elif isinstance(e, PhaseEnded):
            return turn if e.status != "completed" and e.stop_reason not in NOT_GUARD_STOPS else None
    return None


async def measure(paths: list[Path]) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for path in collect_case_files(paths):
        case = load(path)
        run = await build_agent(case).run(case.input)
        found[case.name] = first_intervention(run.events)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--save", type=Path)
    parser.add_argument("--against", type=Path)
    args = parser.parse_args()
    now = asyncio.run(measure(args.paths))
    if args.save:
        args.save.write_text(json.dumps(now, indent=1, sort_keys=True), encoding="utf-8")
    if not args.against:
        for name, turn in sorted(now.items()):
            print(f"{name:50} {turn if turn is not None else '-'}")
        return
    before: dict[str, int | None] = json.loads(args.against.read_text(encoding="utf-8"))
    later = earlier = same = gone = 0
    for name in sorted(now):
        old, new = before.get(name), now[name]
        mark = ""
        if old is not None and new is None:
            gone, mark = gone + 1, "no intervention now"
        elif old is not None and new is not None and new > old:
            later, mark = later + 1, "LATER"
        elif old is not None and new is not None and new < old:
            earlier, mark = earlier + 1, "earlier"
        elif old is None and new is not None:
            mark = "new intervention"
        else:
            same += 1
        print(
            f"{name:50} before {old if old is not None else '-':>3}  after {new if new is not None else '-':>3}  {mark}"
        )
    print(
        f"cases: {len(now)}; first intervention later than before: {later}; earlier: {earlier}; "
        f"none any more: {gone}; unchanged: {same}"
    )


if __name__ == "__main__":
    main()
