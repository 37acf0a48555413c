"""The executor runs tools: arguments validated against the schema, a timeout per tool, a
retry policy for retryable failures, several calls at once with results in proposal order.
Nothing a tool does escapes as an exception: every outcome is a `ToolResult`."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .tools import Tool, ToolResult

RETRYABLE_EXCEPTIONS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter and a cap; only `retryable` results are retried."""

    max_attempts: int = 3
    base_delay: float = 0.25
    max_delay: float = 8.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: random.Random) -> float:
        raw = min(self.base_delay * (2 ** (attempt - 1)), self.max_delay)
        return float(raw * (1 - self.jitter + self.jitter * rng.random()))


@dataclass(frozen=True)
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


def validate_arguments(tool: Tool, arguments: Any) -> BaseModel | ToolResult:
    if not isinstance(arguments, dict):
        return ToolResult.failure(
            "invalid_arguments", f"arguments must be a JSON object, got {type(arguments).__name__}"
        )
    try:
        return tool.args_model.model_validate(arguments)
    except ValidationError as error:
        return ToolResult.failure(
            "invalid_arguments",
            describe_validation_error(error),
            user_action=f"call {tool.wire_name} again with arguments matching its schema",
        )


@dataclass
class Executor:
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    default_timeout: float | None = 60.0
    max_parallel: int = 4
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)

    async def run(self, tool: Tool, arguments: BaseModel) -> Execution:
        started = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            result = await self._attempt(tool, arguments)
            if not result.retryable or attempt >= self.retry.max_attempts:
                return Execution(result, attempt, (time.perf_counter() - started) * 1000)
            await self.sleep(self.retry.delay(attempt, self.rng))

    async def run_many(self, jobs: Sequence[tuple[Tool, BaseModel]]) -> list[Execution]:
        """Run concurrently (bounded); results come back in the order proposed."""
        semaphore = asyncio.Semaphore(max(self.max_parallel, 1))

        async def bounded(tool: Tool, arguments: BaseModel) -> Execution:
            async with semaphore:
                return await self.run(tool, arguments)

        return list(await asyncio.gather(*(bounded(t, a) for t, a in jobs)))

    async def _attempt(self, tool: Tool, arguments: BaseModel) -> ToolResult:
        limit = tool.timeout if tool.timeout is not None else self.default_timeout
        try:
            async with asyncio.timeout(limit):
                raw = await tool.call(arguments)
        except TimeoutError:
            return ToolResult.failure(
                "timeout",
                f"{tool.wire_name} did not finish within {limit:g} s",
                retryable=True,
                user_action="try a smaller request, or another approach",
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a tool that raises never crashes the run
            return ToolResult.failure(
                "exception",
                f"{type(error).__name__}: {error}",
                retryable=isinstance(error, RETRYABLE_EXCEPTIONS),
            )
        return tool.to_result(raw)
