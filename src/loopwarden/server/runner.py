"""Runs jobs in the background: a bounded number at once, a bounded queue behind them (a full
queue is refused with a Retry-After), every event committed to the store before subscribers are
woken, and a `report_finished` event at the end of every run, whatever happened."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator
from typing import Any

from ..errors import LoopwardenError
from ..events import ApprovalDecided, Event, EventStamper, Totals
from ..policy.approval import ApprovalGate
from ..report.events import ReportFinished
from ..trace.store import FINAL_STATUSES, RunStatus, RunStore
from .events import APPROVAL_REQUIRED
from .jobs import Job
from .settings import ServerSettings

log = logging.getLogger(__name__)
TERMINAL_EVENT = "report_finished"
_REPORT_STATUSES: dict[str, RunStatus] = {
    "completed": "completed",
    "degraded": "degraded",
    "failed": "failed",
    "cancelled": "cancelled",
}


class QueueFull(LoopwardenError):
    def __init__(self, retry_after: int) -> None:
        super().__init__("too many runs are queued; retry later")
        self.retry_after = retry_after


class RunSignals:
    """Wakes SSE streams when a run has new events. A waiter is taken *before* reading the
    store, so an event committed between the read and the wait still wakes it."""

    poll_s = 1.0
    """How long a stream waits for a wake-up before it reads the store anyway (sse.py)."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def waiter(self, run_id: str) -> asyncio.Event:
        return self._events.setdefault(run_id, asyncio.Event())

    def notify(self, run_id: str) -> None:
        event = self._events.pop(run_id, None)
        if event is not None:
            event.set()


class Progress:
    """The run's progress from its milestones: a fixed denominator (the planned stage count)
    and each stage's state."""

    def __init__(self) -> None:
        self.total = 0
        self.stages: dict[int, dict[str, Any]] = {}

    def update(self, event: Event) -> dict[str, Any]:
        data = event.model_dump()
        self.total = max(self.total, int(data.get("total", 0)))
        index = int(data.get("index", 0))
        self.stages[index] = {"index": index, "stage": data.get("stage", ""), "state": data.get("state", "")}
        return self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        done = sum(1 for s in self.stages.values() if s["state"] in ("done", "skipped"))
        current = next((s["stage"] for s in sorted(self.stages.values(), key=lambda s: -s["index"])), None)
        return {
            "total": self.total,
            "done": done,
            "current": current,
            "stages": [self.stages[i] for i in sorted(self.stages)],
        }


class Runner:
    def __init__(self, store: RunStore, job: Job, settings: ServerSettings) -> None:
        self.store = store
        self.job = job
        self.settings = settings
        self.signals = RunSignals()
        self._slots = asyncio.Semaphore(settings.max_concurrency)
        self._closing = False
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._gates: dict[str, ApprovalGate] = {}
        """One gate per run, for jobs that take `approvals=`: call ids are unique only within a run
        (the offline explorer numbers its calls the same way every time)."""
        self._gated = _accepts_approvals(job)
        self._pending_calls: dict[tuple[str, str], dict[str, Any]] = {}

    @property
    def active(self) -> int:
        return len(self._tasks)

    def submit(self, run_id: str, config: Any) -> None:
        """Start a run in the background, or raise QueueFull. Synchronous on purpose: the check
        and the reservation happen with no await in between, so concurrent submissions cannot
        overshoot the limit."""
        if len(self._tasks) >= self.settings.max_concurrency + self.settings.max_queue:
            raise QueueFull(self.settings.retry_after_s)
        task = asyncio.create_task(self._execute(run_id, config), name=f"run-{run_id}")
        self._tasks[run_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(run_id, None))

    def cancel(self, run_id: str) -> bool:
        """Cancel a run this server is executing or holding in its queue. False if it is not here."""
        task = self._tasks.get(run_id)
        if task is None:
            return False
        task.cancel()
        return True

    async def cancel_all(self) -> list[str]:
        """Cancel every run executing or queued here, as a cancel request would (each ends
        `cancelled` with its events kept), and wait until they have ended. Returns their ids."""
        running = dict(self._tasks)
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        return list(running)

    async def shutdown(self) -> None:
        """On server shutdown, runs still here end as `interrupted` (not `cancelled`: nobody asked),
        with their events kept, exactly as after a crash."""
        self._closing = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.store.mark_interrupted_on_start(reason="the server shut down while this run was in progress")

    def record(self, run_id: str, event: Event) -> int:
        """Commit one event, then wake the run's streams."""
        seq = self.store.append_event(run_id, event)
        self.signals.notify(run_id)
        return seq

    async def _execute(self, run_id: str, config: Any) -> None:
        progress = Progress()
        finished = False
        try:
            async with self._slots:
                self.store.set_status(run_id, "running")
                self.signals.notify(run_id)
                start = self.store.last_seq(run_id)
                extra: dict[str, Any] = {}
                if self._gated:
                    extra["approvals"] = self._gates[run_id] = ApprovalGate()
                events = self.job(config, run_id=run_id, start_seq=start, **extra)
                try:
                    async for event in events:
                        self.record(run_id, event)
                        self._apply(run_id, event, progress)
                        finished = event.type == TERMINAL_EVENT
                        if finished:
                            break
                finally:
                    await _close(events)
            if not finished:
                self._finish(run_id, "failed", "the job ended without a report_finished event", ["job_incomplete"])
        except asyncio.CancelledError:
            if not self._closing:
                self._finish(run_id, "cancelled", "cancelled by request", ["cancelled"])
        except Exception as error:  # a crashing job must still end its run with a terminal event
            log.exception("run %s crashed", run_id)
            self._finish(run_id, "failed", f"{type(error).__name__}: {error}", ["crashed"])
        finally:
            for key in [k for k in self._pending_calls if k[0] == run_id]:
                del self._pending_calls[key]
            self._gates.pop(run_id, None)

    def _apply(self, run_id: str, event: Event, progress: Progress) -> None:
        """Side effects of an event on the run's row (progress, approvals, final status)."""
        if event.type == "milestone":
            self.store.set_progress(run_id, progress.update(event))
        elif event.type == APPROVAL_REQUIRED:
            data = event.model_dump()
            call_id = str(data.get("call_id", ""))
            self.store.add_approval(
                run_id, call_id, str(data.get("tool", "")), data.get("arguments"), str(data.get("reason", ""))
            )
            self._pending_calls[(run_id, call_id)] = data
            self.store.set_status(run_id, "paused")
        elif event.type == "approval_decided" and self._gated:
            data = event.model_dump()
            # Decided in the job (e.g. the gate timed out): mirror it in the store.
            self.store.decide_approval(
                run_id, str(data.get("call_id", "")), approve=bool(data.get("approved")), by=data.get("by")
            )
            self._resume_if_clear(run_id)
        elif event.type == TERMINAL_EVENT:
            data = event.model_dump()
            status = _REPORT_STATUSES.get(str(data.get("status")), "failed")
            totals = data.get("totals")
            self.store.set_status(
                run_id,
                status,
                message=str(data.get("message", "")),
                stop_reasons=[str(r) for r in data.get("stop_reasons", [])],
                totals=totals if isinstance(totals, dict) else None,
            )
        self.signals.notify(run_id)

    def _finish(self, run_id: str, status: RunStatus, message: str, stop_reasons: list[str]) -> None:
        end_run(self.store, run_id, status, message, stop_reasons)
        self.signals.notify(run_id)

    # -- approvals --------------------------------------------------------------------------

    def decide(self, run_id: str, call_id: str, *, approve: bool, by: str | None, note: str = "") -> bool:
        """Record a decision on a paused call (the first one stands) and pass it to the gate the
        job waits on. False when there is no pending approval with that id."""
        if self.store.decide_approval(run_id, call_id, approve=approve, by=by, note=note) is None:
            return False
        pending = self._pending_calls.pop((run_id, call_id), {})
        gate = self._gates.get(run_id)
        if gate is not None:
            # "running" before the job is woken: written after, it could land on the status the
            # job has ended with meanwhile (this runs on a worker thread; the job on the loop).
            self._resume_if_clear(run_id)
            gate.decide(call_id, approve, note or None, by=by)  # the job reports ApprovalDecided
        else:
            stamp = EventStamper(run_id, self.store.last_seq(run_id))
            decided = stamp(
                ApprovalDecided,
                turn=int(pending.get("turn", 0) or 0),
                call_id=call_id,
                tool=str(pending.get("tool", "")),
                approved=approve,
                reason=note or None,
                by=by,
            )
            self.record(run_id, decided)
            self._resume_if_clear(run_id)
        return True

    def _resume_if_clear(self, run_id: str) -> None:
        run = self.store.get_run(run_id)
        if run.status == "paused" and not self.store.approvals(run_id, status="pending"):
            self.store.set_status(run_id, "running")
        self.signals.notify(run_id)


def end_run(store: RunStore, run_id: str, status: RunStatus, message: str, stop_reasons: list[str]) -> None:
    """End a run that has no terminal event yet with one (a crashed job, a cancelled run)."""
    run = store.get_run(run_id)
    if run.status in FINAL_STATUSES:
        return
    stamp = EventStamper(run_id, run.last_seq)
    report_status = "cancelled" if status == "cancelled" else "failed"
    event = stamp(ReportFinished, status=report_status, stop_reasons=stop_reasons, totals=Totals(), message=message)
    store.append_event(run_id, event)
    store.set_status(run_id, status, message=message, stop_reasons=stop_reasons)


def _accepts_approvals(job: Job) -> bool:
    try:
        parameters = inspect.signature(job).parameters
    except (TypeError, ValueError):
        return False
    return "approvals" in parameters


async def _close(events: AsyncIterator[Event]) -> None:
    """Close an async generator job so its cleanup (temp files, subprocesses) runs now."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()
