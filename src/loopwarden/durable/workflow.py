"""A run is a DBOS workflow: `run_workflow(job_spec, config, run_id)` runs the server's job
(`module:function`, e.g. the report pipeline) and commits its events to the run store.

On recovery the workflow starts again from the top: steps return their recorded outputs
(steps.py), so the job regenerates exactly the events it had produced, with the same sequence
numbers. Those already in the store are skipped; the first event past the store's last one is
where the run really continues. Only the workflow writes a running durable run's events, so
the numbering cannot interleave with anyone else's. A skipped event must be of the type stored
at its number: one that is not (what reruns on recovery answered otherwise, e.g. the run's folder
changed since the crash) ends the run, failed, saying so (`ReplayDiverged`), rather than appending
events that do not follow those already streamed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dbos import DBOS

from ..events import Event
from ..hooks import model_hook, run_hook
from ..server.runner import _REPORT_STATUSES, TERMINAL_EVENT, Progress, _accepts_approvals, end_run
from ..trace.store import RunStatus, RunStore
from .secrets import SecretRef, release, restore
from .steps import DurableApprovalGate, durable_model, make_durable

log = logging.getLogger(__name__)
WORKFLOW_NAME = "loopwarden.run"
STORE_THREADS = 8
_store_threads = ThreadPoolExecutor(STORE_THREADS, thread_name_prefix="loopwarden-store")
"""Each thread keeps its own store connection: this bounds a worker's connections for events."""


class _Process:
    """What the workflows of this process write to: set once at launch (engine.py)."""

    store: RunStore | None = None
    wake: Callable[[str], None] | None = None
    """Called after each committed event (the embedded server wakes its SSE streams with it)."""


process = _Process()


def _store() -> RunStore:
    if process.store is None:
        raise RuntimeError("durable runs need loopwarden.durable.engine.launch() first")
    return process.store


@DBOS.workflow(name=WORKFLOW_NAME)
async def run_workflow(job_spec: str, config: Any, run_id: str, secrets: list[dict[str, Any]] | None = None) -> str:
    """`secrets`: where the configuration's withheld secrets are found again (secrets.py)."""
    store = _store()
    start = await DBOS.run_step_async({"name": "claim"}, _claim, run_id)
    recorder = EventRecorder(store, run_id)
    config = restore(config, run_id, [SecretRef.model_validate(ref) for ref in secrets or []])
    token, model_token = run_hook.set(make_durable), model_hook.set(durable_model)
    try:
        job = _load_job(job_spec)
        extra: dict[str, Any] = {"approvals": DurableApprovalGate()} if _accepts_approvals(job) else {}
        events: AsyncIterator[Event] = job(config, run_id=run_id, start_seq=start, **extra)
        try:
            async for event in events:
                await recorder.record(event)
                if event.type == TERMINAL_EVENT:
                    break
        except RunEnded:  # cancelled (and ended) from outside while it ran
            return store.get_run(run_id).status
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
    except Exception as error:  # the run ends with a terminal event whatever the job did
        log.exception("run %s crashed", run_id)
        reason = "replay_diverged" if isinstance(error, ReplayDiverged) else "crashed"
        finish(store, run_id, "failed", f"{type(error).__name__}: {error}", [reason], recorder.wake)
        return "failed"
    finally:
        run_hook.reset(token)
        model_hook.reset(model_token)
        release(run_id)
    if not recorder.finished:
        finish(store, run_id, "failed", "the job ended without a report_finished event", ["job_incomplete"])
    return store.get_run(run_id).status


def _claim(run_id: str) -> int:
    """First step: the run is running and its job numbers events after those already stored."""
    store = _store()
    store.set_status(run_id, "running")
    if process.wake is not None:
        process.wake(run_id)
    return store.last_seq(run_id)


class ReplayDiverged(Exception):
    """A recovered run regenerated an event other than the one stored at that number."""


class RunEnded(Exception):
    """The run's row is final (cancelled by request): the workflow stops writing to it."""


class EventRecorder:
    """Commits a workflow's events, skipping those a replay regenerates, and mirrors them on the
    run's row (progress, approvals, final status)."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.progress = Progress()
        self.finished = False
        self.wake = process.wake

    async def record(self, event: Event) -> None:
        """Off the event loop: a worker's loop runs many workflows, and the store is synchronous."""
        await asyncio.get_running_loop().run_in_executor(_store_threads, self._record, event)

    def _record(self, event: Event) -> None:
        if event.type == "milestone":
            self.progress.update(event)  # replayed milestones rebuild the progress snapshot too
        if event.type == TERMINAL_EVENT:
            self.finished = True
        run = self.store.get_run(self.run_id)
        if event.seq <= run.last_seq:  # committed before the crash: this is the replay reaching it again
            stored = self.store.event_rows(self.run_id, event.seq - 1, limit=1)
            if stored and stored[0].type != event.type:
                raise ReplayDiverged(
                    f"the recovered run replayed a {event.type} event where event {event.seq} was a"
                    f" {stored[0].type} (did its folder change since the crash?)"
                )
            return
        if run.finished:
            raise RunEnded(self.run_id)
        self.store.append_event(self.run_id, event)
        self._apply(event)
        if self.wake is not None:
            self.wake(self.run_id)

    def _apply(self, event: Event) -> None:
        data = event.model_dump()
        if event.type == "milestone":
            self.store.set_progress(self.run_id, self.progress.snapshot())
        elif event.type == "approval_required":
            args = (str(data.get("call_id", "")), str(data.get("tool", "")), data.get("arguments"))
            self.store.add_approval(self.run_id, *args, str(data.get("reason", "")))
            self.store.set_status(self.run_id, "paused")
        elif event.type == "approval_decided":
            call_id = str(data.get("call_id", ""))
            self.store.decide_approval(self.run_id, call_id, approve=bool(data.get("approved")), by=data.get("by"))
            if not self.store.approvals(self.run_id, status="pending"):
                self.store.set_status(self.run_id, "running")
        elif event.type == TERMINAL_EVENT:
            totals = data.get("totals")
            self.store.set_status(
                self.run_id,
                _REPORT_STATUSES.get(str(data.get("status")), "failed"),
                message=str(data.get("message", "")),
                stop_reasons=[str(r) for r in data.get("stop_reasons", [])],
                totals=totals if isinstance(totals, dict) else None,
            )


def finish(
    store: RunStore,
    run_id: str,
    status: RunStatus,
    message: str,
    stop_reasons: list[str],
    wake: Callable[[str], None] | None = None,
) -> None:
    end_run(store, run_id, status, message, stop_reasons)
    if wake is not None:
        wake(run_id)


def _load_job(spec: str) -> Any:
    from ..server.jobs import load_job

    return load_job(spec)


def job_spec(job: Any) -> str:
    """`module:function` naming a job, so a worker process can import it."""
    spec = f"{job.__module__}:{job.__qualname__}"
    if "<" in spec:
        raise ValueError(f"a durable run's job must be a module-level function, not {spec}")
    return spec
