"""What becomes a DBOS step inside a durable run, and how a run is adapted to it.

- Each model call is one step: its reply (or its `ModelError`) is recorded; on recovery the
  recorded reply is returned and the model is not called again.
- Each tool execution is one step, all its attempts included (the executor's retries run inside
  it): the recorded `Execution` is returned on recovery and the tool does not run again. Step ids
  are drawn in proposal order before the turn's calls run concurrently, so the same call gets
  the same step on every replay, whichever call finishes first.
- Waiting for an approval is `DBOS.recv` on a topic per call id: a decision sent while the run
  was down is waiting for it when it comes back.

- A model called outside a run's loop (the report's drafts and reviews, a vision model reading an
  image) is a step too (`hooks.adapt_model`).
- A tool declared `rerun_on_recovery` (its effect is state in the process, e.g. the report's
  exploration tools, which build the record of what was read) is not a step: a recovered run
  runs it again, so that state is rebuilt. Its first model call is a step at an id drawn with
  the turn's others, in proposal order, so it is replayed, never paid twice.

Everything else in the loop (the guard's ladder counts, detector windows, checklist, remembered
results, budgets spent, event numbers) is plain code over those recorded outputs, so replaying
the workflow rebuilds it exactly: a recovered run gives the verdicts it would have given.

The exactly-once boundary: a step that *finished* is never run again. A step that was running
when the process died has no recorded output and runs again on recovery: a model call is paid
twice, a tool runs twice. For tools with side effects (`side_effect="write"`), read
`loopwarden.durable.idempotency_key()` inside the tool and pass it to the system you write to (a payment API's
Idempotency-Key header, a unique column): it is the same string on every execution of that call,
across crashes, so the second execution can be recognised and dropped there.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from dbos import DBOS, StepOptions
from pydantic import BaseModel

from ..executor import Execution
from ..hooks import idempotency_key_var
from ..models.base import ClientNote, ModelError, ModelReply, ModelRequest, Usage
from ..policy.approval import ApprovalGate, Decision, PendingCall
from ..tools import Tool, ToolResult

if TYPE_CHECKING:
    from ..executor import Executor
    from ..loop import Run
    from ..models.base import Model

APPROVAL_WAIT_S = 3600.0
"""One durable wait for a decision; waits without a gate timeout simply wait again."""
_reserved_model_step: ContextVar[list[Any] | None] = ContextVar("loopwarden_reserved_model_step", default=None)
"""Inside a `rerun_on_recovery` tool: the step id drawn for its first model call."""


class DurableModel:
    """A model whose every call is a recorded step of the current workflow."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self.inner, name)  # context_window, prices' names, ...: what the model says of itself

    async def complete(self, request: ModelRequest) -> ModelReply:
        options: StepOptions = {"name": f"model:{self.name}"}
        reserved = _reserved_model_step.get()
        if reserved:
            outcome: dict[str, Any] = await reserved.pop().run_async(options, self._call, request)
        else:
            outcome = await DBOS.run_step_async(options, self._call, request)
        if "error" in outcome:
            error = outcome["error"]
            notes = [ClientNote.model_validate(n) for n in error.pop("notes", [])]
            usage = Usage.model_validate(error.pop("usage", {}))
            raise ModelError(error.pop("kind"), error.pop("message"), notes=notes, usage=usage, **error)
        return ModelReply.model_validate(outcome["reply"])

    async def _call(self, request: ModelRequest) -> dict[str, Any]:
        """Replies and model errors are data in the record (JSON-shaped, no pickled classes)."""
        try:
            reply = await self.inner.complete(request)
        except ModelError as error:
            return {
                "error": {
                    "kind": error.kind,
                    "message": error.message,
                    "retryable": error.retryable,
                    "status": error.status,
                    "notes": [n.model_dump(mode="json") for n in error.notes],
                    "attempts": error.attempts,
                    "usage": error.usage.model_dump(mode="json"),
                    "field": error.field,
                }
            }
        return {"reply": reply.model_dump(mode="json")}


def durable_executor(executor: Executor) -> Executor:
    """A copy of the run's executor whose tool executions are steps at ids reserved in proposal
    order (the executor's own batching, limits and retries are kept)."""
    clone = copy.copy(executor)
    plain_run, plain_many = executor.run, clone.run_many
    reserved: dict[int, Any] = {}

    async def run(tool: Tool, arguments: BaseModel) -> Execution:
        reservation = reserved.pop(id(arguments), None)
        if reservation is None:  # not through run_many: nothing to pair it with on replay
            return await plain_run(tool, arguments)
        key = f"{DBOS.workflow_id}:{reservation.step_id}"
        if tool.rerun_on_recovery:
            return await _rerun(plain_run, tool, arguments, key, reservation)
        record: dict[str, Any] = await reservation.run_async(
            {"name": f"tool:{tool.wire_name}"}, _execute, plain_run, tool, arguments, key
        )
        return Execution(ToolResult.model_validate(record["result"]), record["attempts"], record["duration_ms"])

    async def run_many(jobs: Sequence[tuple[Tool, BaseModel]]) -> list[Execution]:
        for _, arguments in jobs:
            reserved[id(arguments)] = DBOS.reserve_step()
        return await plain_many(jobs)

    clone.run = run  # type: ignore[method-assign]
    clone.run_many = run_many  # type: ignore[method-assign]
    return clone


async def _rerun(plain_run: Any, tool: Tool, arguments: BaseModel, key: str, reservation: Any) -> Execution:
    """Runs as workflow code, again on every recovery; its first model call at `reservation`."""
    tokens = idempotency_key_var.set(key), _reserved_model_step.set([reservation])
    try:
        execution: Execution = await plain_run(tool, arguments)
        return execution
    finally:
        idempotency_key_var.reset(tokens[0])
        _reserved_model_step.reset(tokens[1])


async def _execute(plain_run: Any, tool: Tool, arguments: BaseModel, key: str) -> dict[str, Any]:
    token = idempotency_key_var.set(key)
    try:
        execution: Execution = await plain_run(tool, arguments)
    finally:
        idempotency_key_var.reset(token)
    return {
        "result": execution.result.model_dump(mode="json"),
        "attempts": execution.attempts,
        "duration_ms": execution.duration_ms,
    }


class DurableApprovalGate(ApprovalGate):
    """Waits for decisions sent to the workflow (`approval_topic(call_id)`), durably."""

    async def wait(self, call: PendingCall) -> Decision:
        topic = approval_topic(call.call_id)
        waited = 0.0
        while True:
            window = APPROVAL_WAIT_S if self.timeout is None else min(APPROVAL_WAIT_S, self.timeout - waited)
            message = await DBOS.recv_async(topic, timeout_seconds=window)
            if message is not None:
                return Decision.model_validate(message)
            waited += window
            if self.timeout is not None and waited >= self.timeout:
                return Decision(approve=False, reason=f"no decision within {self.timeout:g} s", by="timeout")


def approval_topic(call_id: str) -> str:
    return f"approval:{call_id}"


def durable_model(model: Model) -> Model:
    """The model hook installed inside a durable workflow (hooks.adapt_model)."""
    return model if isinstance(model, DurableModel) else DurableModel(model)


def make_durable(run: Run) -> None:
    """The run hook installed inside a durable workflow (hooks.run_hook)."""
    agent = copy.copy(run.agent)  # the caller's Agent is shared by its runs: adapt a copy
    agent.model = durable_model(agent.model)
    run.agent = agent
    run.executor = durable_executor(run.executor)
