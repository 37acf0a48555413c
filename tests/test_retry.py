"""One retry module for the runtime: retryable statuses, Retry-After, full-jitter backoff, and the
executor and the model client agreeing on all three."""

from __future__ import annotations

import email.utils
import random

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.executor import exception_result
from loopwarden.models.faults import RETRYABLE_KINDS, kind_of_status
from loopwarden.retry import Retrier, Retry, RetryPolicy, is_retryable_status, retry_after_seconds
from loopwarden.tools import http_status_failure, tool


def test_retry_after_in_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after_seconds({"Retry-After": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"Retry-After": date}, now=now) == pytest.approx(30, abs=1)
    assert retry_after_seconds({"Retry-After": email.utils.formatdate(now - 60, usegmt=True)}, now=now) == 0.0
    assert retry_after_seconds(httpx.Headers({"Retry-After": date}), now=now) == pytest.approx(30, abs=1)
    for unreadable in ("soon", "", "Wed, 99 Foo 2026 00:00:00 GMT"):
        assert retry_after_seconds({"Retry-After": unreadable}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None
    assert retry_after_seconds({"Retry-After": "-5"}) == 0.0


@given(
    attempt=st.integers(min_value=1, max_value=40),
    base=st.floats(min_value=0.001, max_value=5),
    cap=st.floats(min_value=0.001, max_value=60),
    retry_after=st.none() | st.floats(min_value=-10, max_value=1e6),
    seed=st.integers(),
)
def test_a_wait_never_exceeds_the_backoff_or_the_cap(
    attempt: int, base: float, cap: float, retry_after: float | None, seed: int
) -> None:
    policy = RetryPolicy(base_delay=base, max_delay=cap)
    delay = policy.delay(attempt, random.Random(seed), retry_after)
    if retry_after is None:
        assert 0 <= delay <= min(base * 2 ** (attempt - 1), cap) + 1e-9
    else:
        assert delay == min(max(retry_after, 0.0), cap)


def test_the_jitter_is_full_as_documented() -> None:
    policy, rng = RetryPolicy(base_delay=1.0, max_delay=100.0), random.Random(7)
    waits = [policy.delay(4, rng) for _ in range(2000)]  # backoff ceiling 8 s
    assert min(waits) < 0.8 and max(waits) > 7.2  # the whole range [0, 8], not its upper half
    assert 3.6 < sum(waits) / len(waits) < 4.4
    assert RetryPolicy(base_delay=1.0, jitter="none").delay(3, rng) == 4.0


@pytest.mark.parametrize("status", range(400, 600))
def test_executor_model_client_and_result_parser_retry_the_same_statuses(status: int) -> None:
    expected = is_retryable_status(status)
    assert expected == (status in (408, 409, 425, 429) or status >= 500)
    request = httpx.Request("GET", "http://x")
    error = httpx.HTTPStatusError("boom", request=request, response=httpx.Response(status, request=request))

    @tool
    def fetch() -> str:
        """Fetch."""
        return ""

    assert exception_result(fetch, error).retryable is expected
    assert (kind_of_status(status, "") in RETRYABLE_KINDS) is expected
    parsed = http_status_failure({"status_code": status})
    assert parsed is not None and parsed.retryable is expected


async def test_the_retrier_gives_up_at_max_attempts_and_tells_each_retry() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    told: list[tuple[int, float]] = []
    retrier = Retrier(RetryPolicy(max_attempts=3, base_delay=1.0, jitter="none"), sleep, random.Random(1))
    outcomes = iter([("fail", 5.0), ("fail", None), ("fail", None), ("ok", None)])

    async def attempt() -> tuple[str, float | None]:
        return next(outcomes)

    done = await retrier.run(
        attempt, lambda o: Retry(o[1]) if o[0] == "fail" else None, lambda o, n, d: told.append((n, d))
    )
    assert (done.attempts, done.gave_up, done.outcome[0]) == (3, True, "fail")
    assert slept == [5.0, 2.0] and told == [(1, 5.0), (2, 2.0)] and done.waited == 7.0


async def test_no_attempt_starts_past_max_elapsed() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    policy = RetryPolicy(max_attempts=50, base_delay=1.0, max_delay=8.0, jitter="none", max_elapsed=10.0)

    async def attempt() -> str:
        return "fail"

    done = await Retrier(policy, sleep).run(attempt, lambda _: Retry())
    assert done.gave_up and sum(slept) < 10.0 and slept == [1.0, 2.0, 4.0]
