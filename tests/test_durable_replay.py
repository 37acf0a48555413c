"""A recovered durable run skips the events it regenerates that are already stored, and stops
(`ReplayDiverged`) when one is not the event stored at its number, instead of appending events
that do not follow those already streamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable_kit import needs_durable
from loopwarden.events import EventStamper
from loopwarden.report.events import Milestone, ScanDone
from loopwarden.trace.store import RunStore

pytestmark = needs_durable
# loopwarden.durable.workflow is imported in the tests: it imports dbos, which every xdist worker
# would otherwise import at collection (durable_kit.needs_durable).


def stored_run(tmp_path: Path) -> tuple[RunStore, str]:
    store = RunStore(tmp_path / "runs.db")
    run_id = store.create_run(status="running").id
    stamp = EventStamper(run_id)
    store.append_event(run_id, stamp(Milestone, index=1, total=2, stage="scan", state="started"))
    store.append_event(run_id, stamp(ScanDone, scan={"files": 1}))
    return store, run_id


async def test_a_replay_skips_what_is_stored_and_continues_after_it(tmp_path: Path) -> None:
    store, run_id = stored_run(tmp_path)
    stamp = EventStamper(run_id)
    from loopwarden.durable.workflow import EventRecorder

    recorder = EventRecorder(store, run_id)
    await recorder.record(stamp(Milestone, index=1, total=2, stage="scan", state="started"))
    await recorder.record(stamp(ScanDone, scan={"files": 1}))
    await recorder.record(stamp(Milestone, index=1, total=2, stage="scan", state="done"))
    assert [(e.seq, e.type) for e in store.event_rows(run_id)] == [(1, "milestone"), (2, "scan_done"), (3, "milestone")]


async def test_a_replay_that_differs_from_the_stored_events_stops(tmp_path: Path) -> None:
    store, run_id = stored_run(tmp_path)
    stamp = EventStamper(run_id)
    from loopwarden.durable.workflow import EventRecorder, ReplayDiverged

    recorder = EventRecorder(store, run_id)
    await recorder.record(stamp(Milestone, index=1, total=2, stage="scan", state="started"))
    with pytest.raises(ReplayDiverged, match="replayed a milestone event where event 2 was a scan_done"):
        await recorder.record(stamp(Milestone, index=1, total=2, stage="scan", state="done"))
    assert len(store.event_rows(run_id)) == 2  # nothing appended
