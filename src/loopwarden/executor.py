"""The executor runs tools: arguments validated against the schema, a timeout per tool, a
retry policy for retryable failures (reads and idempotent writes only: a write that timed out may
have done its work), several calls at once with results in proposal order.
Nothing a tool does escapes as an exception: every outcome is a `ToolResult`."""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from types import CoroutineType
from typing import Any

from pydantic import BaseModel, ValidationError

from .hotpath.frozen import quick_init
from .retry import Retrier, Retry, RetryPolicy, is_retryable_status, retry_after_seconds
from .tools import Tool, ToolResult

__all__ = ["Execution", "Executor", "RetryPolicy", "exception_result", "validate_arguments"]

RETRYABLE_EXCEPTIONS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)
"""Besides these, httpx's transport errors are retryable (see exception_result)."""


@quick_init
@dataclass(frozen=True, slots=True)
class Execution:
    result: ToolResult
    attempts: int
    duration_ms: float


def describe_validation_error(error: ValidationError) -> str:
    """Name each wrong field and what was expected, so the model can correct itself."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(arguments)"
        got = item.get("input")
        shown = f" (got {got!r})" if got is not None and item["type"] != "missing" else ""
        parts.append(f"argument '{where}': {item['msg']}{shown}")
    return "; ".join(parts)


def validation_errors(error: ValidationError) -> list[dict[str, Any]]:
    """The same, as data: field, what was expected, what came (absent when missing)."""
    errors: list[dict[str, Any]] = []
    for item in error.errors():
        entry: dict[str, Any] = {
            "field": ".".join(str(p) for p in item["loc"]) or "(arguments)",
            "expected": item["msg"],
            "kind": item["type"],
        }
        if item["type"] != "missing":
            entry["got"] = item.get("input")
        errors.append(entry)
    return errors


def exception_result(tool: Tool, error: Exception) -> ToolResult:
    """A raised exception as a result; network trouble and HTTP 408/429/5xx are retryable. An
    OSError names only the last component of its paths: host paths never reach the model."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, OSError) and (error.filename is not None or error.filename2 is not None):
        names = [
            os.path.basename(os.fsdecode(f)) if isinstance(f, str | bytes) else str(f)
            for f in (error.filename, error.filename2)
            if f is not None
        ]
        text = f"{type(error).__name__}: {error.strerror or 'error'}: {' -> '.join(names)}"
    # httpx is not imported for this: an httpx error can only exist once a tool has imported it.
    hx = sys.modules.get("httpx")
    if hx is not None and isinstance(error, hx.HTTPStatusError):
        status = error.response.status_code
        return ToolResult.failure(
            f"http_{status}",
            text,
            retryable=is_retryable_status(status),
            data={"status_code": status, "retry_after": retry_after_seconds(error.response.headers)},
        )
    if isinstance(error, TimeoutError) or (hx is not None and isinstance(error, hx.TimeoutException)):
        return ToolResult.failure("timeout", text, retryable=True)
    if isinstance(error, RETRYABLE_EXCEPTIONS) or (hx is not None and isinstance(error, hx.TransportError)):
        return ToolResult.failure("connection_error", text, retryable=True)
    return ToolResult.failure("exception", text, retryable=False)


def retry_after_of(result: ToolResult) -> float | None:
    data = result.data
    value = data.get("retry_after") if isinstance(data, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def validate_arguments(tool: Tool, arguments: Any) -> BaseModel | ToolResult:
    if not isinstance(arguments, dict):
        return ToolResult.failure(
            "invalid_arguments", f"arguments must be a JSON object, got {type(arguments).__name__}"
        )
    model = tool.args_model
    try:
        own = _own_validate.get(model)
        if own is None:
            own = _has_own_validate(model)
        if own:
            return model.model_validate(arguments)
        # pydantic's model_validate is this call with every option at its default, through a frame
        return model.__pydantic_validator__.validate_python(arguments)  # type: ignore[no-any-return]
    except ValidationError as error:
        return ToolResult.failure(
            "invalid_arguments",
            describe_validation_error(error),
            user_action=f"call {tool.wire_name} again with arguments matching its schema",
            data={"errors": validation_errors(error)},
        )


_own_validate: dict[type[BaseModel], bool] = {}
_PYDANTIC_VALIDATE = BaseModel.model_validate.__func__  # type: ignore[attr-defined]


def _has_own_validate(model: type[BaseModel]) -> bool:
    """Whether an argument model has a `model_validate` of its own (then it is called); found once per class."""
    if len(_own_validate) >= 1024:  # models made per declaration (schema tools) keep it bounded
        _own_validate.clear()
    found = _own_validate[model] = model.model_validate.__func__ is not _PYDANTIC_VALIDATE  # type: ignore[attr-defined]
    return found


@dataclass
class Executor:
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    default_timeout: float | None = 60.0
    max_parallel: int = 4
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random | None = None
    """Draws the retry jitter; made on the first retry when not given (seeding costs a syscall)."""

    async def run(self, tool: Tool, arguments: BaseModel) -> Execution:
        """Attempt until a result is not retryable or the policy gives up (retry.py);
        deterministic failures return at once."""
        if tool.runs_inline:  # a quick sync tool runs here and now: no coroutine to make for its attempt
            done = self.run_inline(tool, arguments)
            return done if isinstance(done, Execution) else await done
        started = time.perf_counter()
        first = await self._attempt(tool, arguments)
        if not first.retryable:  # the common call: nothing to retry, no retrier to set up
            return Execution(first, 1, (time.perf_counter() - started) * 1000)
        return await self._retried(tool, arguments, first, started)

    def run_inline(self, tool: Tool, arguments: BaseModel) -> Execution | Coroutine[Any, Any, Execution]:
        """`run` for a tool that runs inline (`Tool.runs_inline`), without a coroutine of its own
        when the first result needs no retry; else a coroutine that does the rest."""
        started = time.perf_counter()
        done = self.attempt_inline(tool, arguments, started)
        if type(done) is CoroutineType:
            return done
        return Execution(done, 1, (time.perf_counter() - started) * 1000)  # type: ignore[arg-type]

    def attempt_inline(
        self, tool: Tool, arguments: BaseModel, started: float
    ) -> ToolResult | Coroutine[Any, Any, Execution]:
        """`run_inline` begun at `started` (`time.perf_counter()`), for a caller that keeps a final
        first result itself: that result (one attempt, which took until now), or (a coroutine,
        exactly `types.CoroutineType`) the coroutine that retries it. No `Execution` to build
        for the common call (about 3,500 instructions with its frame and free: the loop's turn)."""
        first = self._inline_attempt(tool, arguments)
        if not first.retryable:
            return first
        return self._retried(tool, arguments, first, started)

    async def _retried(self, tool: Tool, arguments: BaseModel, first: ToolResult, started: float) -> Execution:
        if not tool.retried_automatically:  # a write may have done its work before it failed
            return Execution(_not_retried(tool, first), 1, (time.perf_counter() - started) * 1000)
        if self.rng is None:
            self.rng = random.Random()
        retrier = Retrier(self.retry, self.sleep, self.rng)
        tried = (first, time.perf_counter() - started)
        done = await retrier.run(lambda: self._attempt(tool, arguments), _wants_retry, tried=tried)
        wall_ms = (time.perf_counter() - started) * 1000
        result = _gave_up(done.outcome, done.attempts) if done.gave_up else done.outcome
        return Execution(result, done.attempts, wall_ms)

    def start(self, jobs: Sequence[tuple[Tool, BaseModel]]) -> list[Execution] | Coroutine[Any, Any, list[Execution]]:
        """`run_many(jobs)`, for the loop: a turn's one call of a tool that runs inline is made
        here and now, with no coroutine for it, `run_many` or `run` (the executions, or a coroutine
        for the rest when it is to be retried); the general way when this executor's `run` or
        `run_many` is not its class's own (durable/steps.py makes each execution a step)."""
        if len(jobs) == 1 and self.inline(jobs[0][0]):
            done = self.run_inline(*jobs[0])
            return [done] if isinstance(done, Execution) else _one(done)
        return self.run_many(jobs)

    def inline(self, tool: Tool) -> bool:
        """Whether a turn's one call of this tool may be made here and now (`run_inline`): the
        tool runs inline and this executor's `run` and `run_many` are its class's own."""
        if type(self) is not Executor or not tool.runs_inline:
            return False
        own = self.__dict__
        return "run" not in own and "run_many" not in own

    async def run_many(self, jobs: Sequence[tuple[Tool, BaseModel]]) -> list[Execution]:
        """Run concurrently (bounded); results come back in the order proposed. A write is a
        barrier: it waits for the calls proposed before it, and the calls after it wait for it,
        so "record, then show the trend" in one turn reads what was just written."""
        if len(jobs) == 1:  # the common turn: one call, no tasks to schedule
            return [await self.run(*jobs[0])]
        semaphore = asyncio.Semaphore(max(self.max_parallel, 1))

        async def bounded(tool: Tool, arguments: BaseModel) -> Execution:
            async with semaphore:
                return await self.run(tool, arguments)

        executions: list[Execution] = []
        for batch in _batches(jobs):
            executions += await asyncio.gather(*(bounded(t, a) for t, a in batch))
        return executions

    def _inline_attempt(self, tool: Tool, arguments: BaseModel) -> ToolResult:
        """A quick sync tool's attempt: no thread hop, and no timer (nothing could interrupt it)."""
        try:
            raw = tool.call_inline(arguments)
        except TimeoutError:  # as the timer's own, below
            return self._timed_out(tool)
        except Exception as error:  # a tool that raises never crashes the run
            return exception_result(tool, error)
        return self._result(tool, raw)

    async def _attempt(self, tool: Tool, arguments: BaseModel) -> ToolResult:
        if tool.runs_inline:
            return self._inline_attempt(tool, arguments)
        try:
            async with asyncio.timeout(self._limit(tool)):
                raw = await tool.call(arguments)
        except TimeoutError:
            return self._timed_out(tool)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a tool that raises never crashes the run
            return exception_result(tool, error)
        return self._result(tool, raw)

    def _limit(self, tool: Tool) -> float | None:
        return tool.timeout if tool.timeout is not None else self.default_timeout

    def _timed_out(self, tool: Tool) -> ToolResult:
        limit = self._limit(tool)  # None: the tool's own TimeoutError, with no limit set here
        return ToolResult.failure(
            "timeout",
            f"{tool.wire_name} did not finish" + (f" within {limit:g} s" if limit is not None else ""),
            retryable=True,
            user_action="try a smaller request, or another approach",
        )

    @staticmethod
    def _result(tool: Tool, raw: Any) -> ToolResult:
        try:
            return tool.to_result(raw)
        except Exception as error:  # a broken result parser is the tool's failure, not the run's
            return exception_result(tool, error)


async def _one(execution: Coroutine[Any, Any, Execution]) -> list[Execution]:
    return [await execution]


def _batches(jobs: Sequence[tuple[Tool, BaseModel]]) -> list[list[tuple[Tool, BaseModel]]]:
    """Consecutive reads share a batch; every write is a batch of its own."""
    batches: list[list[tuple[Tool, BaseModel]]] = []
    reads: list[tuple[Tool, BaseModel]] = []
    for job in jobs:
        if job[0].side_effect != "write":
            reads.append(job)
            continue
        if reads:
            batches.append(reads)
            reads = []
        batches.append([job])
    if reads:
        batches.append(reads)
    return batches


def _wants_retry(result: ToolResult) -> Retry | None:
    return Retry(retry_after_of(result)) if result.retryable else None


def _gave_up(result: ToolResult, attempts: int) -> ToolResult:
    """The last failure, saying it was retried, so the model does not retry it itself at once."""
    if attempts <= 1:
        return result
    note = f"(failed {attempts} times, retried by the runtime)"
    return result.model_copy(update={"message": f"{result.message} {note}" if result.message else note})


def _not_retried(tool: Tool, result: ToolResult) -> ToolResult:
    """A write's retryable failure as it came, saying why the runtime did not run it again."""
    note = (
        f"(not retried automatically: {tool.wire_name} writes and is not declared idempotent,"
        " so it may have done its work; check before calling it again)"
    )
    return result.model_copy(update={"message": f"{result.message} {note}" if result.message else note})
