"""Retrying, once for the whole runtime: which failures are worth another attempt, how long the
server asked us to wait, and how long to back off. The executor (tool calls) and the model
client (HTTP calls to a model) both use this module, so they agree on all three.

    policy = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=8.0)
    outcome = await retrying(attempt, policy, wants_retry=lambda r: Retry(r.retry_after) if r.failed else None)

Backoff is capped exponential with full jitter (a uniform wait between 0 and
`min(max_delay, base_delay * 2 ** (attempt - 1))`), so clients that failed together do not
retry together. A server's Retry-After (seconds, milliseconds or an HTTP date) replaces the
backoff, still capped by `max_delay`.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from .hotpath.frozen import quick_init

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})
"""Besides every 5xx: request timeout, conflict (a lock that timed out), too early, rate limited."""

Jitter = Literal["full", "none"]
T = TypeVar("T")


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt: 408, 409, 425, 429 and every 5xx."""
    return status in RETRYABLE_STATUSES or status >= 500


def retry_after_seconds(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, or `Retry-After` as seconds or as
    an HTTP date (relative to `now`, default the clock). None when absent or unreadable."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    if (ms := lowered.get("retry-after-ms")) is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT by definition
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


@quick_init  # a LoopConfig's default
@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts, how long to wait between them, and when to stop trying."""

    max_attempts: int = 3
    """Attempts in all, the first included."""
    base_delay: float = 0.25
    max_delay: float = 8.0
    """Cap on one wait, Retry-After included."""
    jitter: Jitter = "full"
    """"full": a uniform wait in [0, backoff]; "none": exactly the backoff (for tests and replays)."""
    max_elapsed: float | None = None
    """No new attempt starts once this many seconds (attempts + waits) have passed since the first."""

    def backoff(self, attempt: int) -> float:
        """The ceiling of the wait after attempt number `attempt` (1-based)."""
        return float(min(self.base_delay * 2 ** max(attempt - 1, 0), self.max_delay))

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """The wait after attempt `attempt`: the server's Retry-After when given, else the backoff
        with jitter; never more than `max_delay`."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        ceiling = self.backoff(attempt)
        return ceiling if self.jitter == "none" else rng.uniform(0.0, ceiling)

    def gives_up(self, attempt: int, elapsed: float, next_delay: float) -> bool:
        if attempt >= self.max_attempts:
            return True
        return self.max_elapsed is not None and elapsed + next_delay >= self.max_elapsed


@dataclass(frozen=True)
class Retry:
    """What a failed attempt asks for: another try, after the server's wait if it named one."""

    retry_after: float | None = None


@dataclass(frozen=True)
class Attempted(Generic[T]):
    """The last outcome, how many attempts it took, and whether the policy gave up on it."""

    outcome: T
    attempts: int
    gave_up: bool
    waited: float


@dataclass
class Retrier:
    """Runs attempts under a policy. `sleep` and `rng` are injectable, so tests neither wait nor
    depend on chance; time spent is counted as attempts + waits asked for, not the wall clock."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        wants_retry: Callable[[T], Retry | None],
        on_retry: Callable[[T, int, float], None] | None = None,
        tried: tuple[T, float] | None = None,
    ) -> Attempted[T]:
        """Attempt until `wants_retry` says no or the policy gives up. `on_retry(outcome,
        attempt, delay)` is told before each wait. `tried`: the outcome of a first attempt the
        caller already made, and the seconds it took."""
        n, busy, waited = 0, 0.0, 0.0
        while True:
            n += 1
            if n == 1 and tried is not None:
                outcome, took = tried
                busy += took
            else:
                began = time.perf_counter()
                outcome = await attempt()
                busy += time.perf_counter() - began
            retry = wants_retry(outcome)
            if retry is None:
                return Attempted(outcome, n, False, waited)
            pause = self.policy.delay(n, self.rng, retry.retry_after)
            if self.policy.gives_up(n, busy + waited, pause):
                return Attempted(outcome, n, True, waited)
            if on_retry is not None:
                on_retry(outcome, n, pause)
            await self.sleep(pause)
            waited += pause
