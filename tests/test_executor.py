"""The executor: retries only what is retryable (with backoff, jitter and a cap), times tools
out, runs a turn's calls concurrently and returns results in proposal order."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal

import httpx
import pytest

from loopwarden import Agent, LoopConfig, RetryPolicy, ScriptedModel, ToolResult, call, tool
from loopwarden.events import ToolCallFinished
from loopwarden.executor import Executor, validate_arguments
from loopwarden.tools import Tool

FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)


class Sleeps:
    """An injected sleep that records the backoff asked for instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def executor(**kwargs: Any) -> tuple[Executor, Sleeps]:
    sleeps = Sleeps()
    kwargs.setdefault("retry", RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=4.0))
    return Executor(sleep=sleeps, rng=random.Random(7), **kwargs), sleeps


def args(t: Tool, **values: Any) -> Any:
    validated = validate_arguments(t, values)
    assert not isinstance(validated, ToolResult), validated
    return validated


# -- a real HTTP server for tools that make their own HTTP calls ----------------------------------


class Scripted(BaseHTTPRequestHandler):
    statuses: ClassVar[list[tuple[int, dict[str, str]]]] = []
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        status, headers = type(self).statuses.pop(0) if type(self).statuses else (200, {})
        body = b'{"temperature": 11}' if status == 200 else b'{"error": "busy"}'
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[Scripted]]]:
    handler = type("Handler", (Scripted,), {"statuses": [], "hits": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def http_tool(base_url: str) -> Tool:
    @tool
    async def fetch_temperature(city: str) -> Any:
        """The temperature in a city, from the weather service."""
        async with httpx.AsyncClient(base_url=base_url, timeout=5) as client:
            response = await client.get(f"/temp/{city}")
            response.raise_for_status()
            return response.json()

    return fetch_temperature


async def test_http_503_twice_then_200_succeeds_within_one_call(server: tuple[str, type[Scripted]]) -> None:
    url, handler = server
    handler.statuses = [(503, {}), (503, {})]
    ex, sleeps = executor()
    t = http_tool(url)
    execution = await ex.run(t, args(t, city="oslo"))
    assert execution.result.ok and execution.result.data == {"temperature": 11}
    assert execution.attempts == 3 and len(handler.hits) == 3
    assert len(sleeps.delays) == 2
    assert 0 <= sleeps.delays[0] <= 0.5 and 0 <= sleeps.delays[1] <= 1.0  # backoff doubles, full jitter under it


async def test_http_429_honours_retry_after_within_the_cap(server: tuple[str, type[Scripted]]) -> None:
    url, handler = server
    handler.statuses = [(429, {"Retry-After": "2"}), (429, {"Retry-After": "120"})]
    ex, sleeps = executor()
    t = http_tool(url)
    execution = await ex.run(t, args(t, city="oslo"))
    assert execution.result.ok and execution.attempts == 3
    assert sleeps.delays == [2.0, 4.0]  # the server's wait, capped at max_delay


async def test_http_404_is_deterministic_and_not_retried(server: tuple[str, type[Scripted]]) -> None:
    url, handler = server
    handler.statuses = [(404, {})]
    ex, sleeps = executor()
    t = http_tool(url)
    execution = await ex.run(t, args(t, city="atlantis"))
    assert not execution.result.ok and execution.result.error_type == "http_404"
    assert not execution.result.retryable
    assert execution.attempts == 1 and len(handler.hits) == 1 and sleeps.delays == []


async def test_connection_refused_is_retried_then_reported() -> None:
    # A port nothing listens on: real connection errors, every time.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ex, sleeps = executor()
    t = http_tool(f"http://127.0.0.1:{port}")
    execution = await ex.run(t, args(t, city="oslo"))
    assert execution.result.error_type == "connection_error" and execution.result.retryable
    assert execution.attempts == 3 and len(sleeps.delays) == 2
    assert "failed 3 times" in (execution.result.message or "")


async def test_flaky_tool_raising_connection_errors_succeeds_within_one_call() -> None:
    attempts: list[int] = []

    @tool
    def flaky() -> str:
        """Fails twice, then works."""
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionResetError("peer reset")
        return "fine"

    ex, _ = executor()
    execution = await ex.run(flaky, args(flaky))
    assert execution.result.ok and execution.result.data == "fine" and execution.attempts == 3


async def test_retryable_results_returned_by_the_tool_are_retried_too() -> None:
    seen: list[int] = []

    @tool
    def busy() -> ToolResult:
        """Busy once."""
        seen.append(1)
        if len(seen) == 1:
            return ToolResult.failure("busy", "try later", retryable=True)
        return ToolResult.success("ok")

    ex, _ = executor()
    assert (await ex.run(busy, args(busy))).attempts == 2


@pytest.mark.parametrize(
    "failure",
    [ValueError("bad value"), KeyError("missing"), PermissionError("denied")],
)
async def test_deterministic_exceptions_are_returned_at_once(failure: Exception) -> None:
    calls: list[int] = []

    @tool
    def broken() -> str:
        """Always raises the same way."""
        calls.append(1)
        raise failure

    ex, sleeps = executor()
    execution = await ex.run(broken, args(broken))
    assert execution.result.error_type == "exception" and not execution.result.retryable
    assert type(failure).__name__ in (execution.result.message or "")
    assert calls == [1] and sleeps.delays == []


async def test_a_business_failure_in_the_data_is_not_retried() -> None:
    calls: list[int] = []

    @tool
    def transfer() -> dict[str, Any]:
        """An HTTP 200 that says it failed."""
        calls.append(1)
        return {"success": False, "code": "insufficient_funds", "message": "balance too low"}

    ex, _ = executor()
    execution = await ex.run(transfer, args(transfer))
    assert execution.result.error_type == "insufficient_funds" and calls == [1]


async def test_max_elapsed_caps_the_retries() -> None:
    @tool
    def down() -> str:
        """Never up."""
        raise ConnectionError("down")

    ex, sleeps = executor(retry=RetryPolicy(max_attempts=10, base_delay=1.0, max_delay=8.0, max_elapsed=3.5))
    execution = await ex.run(down, args(down))
    # Delays of ~1, ~2 fit in 3.5 s; the next (~4) would not, so no further attempt starts.
    assert execution.attempts == len(sleeps.delays) + 1 < 10
    assert sum(sleeps.delays) < 3.5


# -- timeouts --------------------------------------------------------------------------------------


async def test_a_slow_async_tool_is_cancelled_on_timeout() -> None:
    cancelled: list[bool] = []

    @tool(timeout=0.05)
    async def slow() -> str:
        """Takes far too long."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    ex, _ = executor(retry=RetryPolicy(max_attempts=1))
    execution = await ex.run(slow, args(slow))
    assert execution.result.error_type == "timeout" and execution.result.retryable
    assert "0.05 s" in (execution.result.message or "")
    assert cancelled == [True]


async def test_a_slow_sync_tool_times_out_in_its_worker_thread() -> None:
    @tool(timeout=0.05)
    def blocking() -> str:
        """Blocks its thread."""
        time.sleep(0.3)
        return "late"

    ex, sleeps = executor(retry=RetryPolicy(max_attempts=2, base_delay=0.01))
    execution = await ex.run(blocking, args(blocking))
    assert execution.result.error_type == "timeout" and execution.attempts == 2 and len(sleeps.delays) == 1


def times_out_once(side_effect: Literal["read", "write"], idempotent: bool) -> tuple[Tool, list[str]]:
    """A tool whose first call does its work, then outlives its timeout; later calls are quick."""
    runs: list[str] = []

    @tool(side_effect=side_effect, idempotent=idempotent, timeout=0.05)
    async def save(entry: str) -> str:
        """Save an entry."""
        runs.append(entry)
        if len(runs) == 1:
            await asyncio.Event().wait()  # only the timeout ends it
        return "saved"

    return save, runs


async def test_a_write_that_times_out_runs_once_and_says_why_it_was_not_retried() -> None:
    save, runs = times_out_once("write", idempotent=False)
    ex, sleeps = executor(retry=FAST)
    execution = await ex.run(save, args(save, entry="dose 5 ml"))
    assert runs == ["dose 5 ml"] and execution.attempts == 1 and sleeps.delays == []
    result = execution.result
    assert result.error_type == "timeout" and result.retryable  # as it came: the model may decide
    assert "not retried automatically: save writes and is not declared idempotent" in (result.message or "")


async def test_a_write_whose_connection_fails_is_not_retried_either() -> None:
    runs: list[int] = []

    @tool(side_effect="write")
    def post() -> str:
        """Post a message."""
        runs.append(1)
        raise ConnectionResetError("peer reset")

    ex, sleeps = executor(retry=FAST)
    execution = await ex.run(post, args(post))
    assert len(runs) == 1 and execution.attempts == 1 and sleeps.delays == []
    assert execution.result.error_type == "connection_error" and "not retried" in (execution.result.message or "")


@pytest.mark.parametrize(("side_effect", "idempotent"), [("read", False), ("write", True)])
async def test_reads_and_idempotent_writes_are_retried_after_a_timeout(
    side_effect: Literal["read", "write"], idempotent: bool
) -> None:
    save, runs = times_out_once(side_effect, idempotent)
    ex, sleeps = executor(retry=FAST)
    execution = await ex.run(save, args(save, entry="x"))
    assert execution.result.ok and execution.attempts == 2 and runs == ["x", "x"] and len(sleeps.delays) == 1


async def test_the_model_reads_why_a_timed_out_write_was_not_retried() -> None:
    save, runs = times_out_once("write", idempotent=False)
    model = ScriptedModel([call("save", {"entry": "a"}), "Not sure it was saved."])
    result = await Agent(model, [save], config=LoopConfig(retry=FAST)).run("save a")
    finished = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert [(e.error_type, e.attempts) for e in finished] == [("timeout", 1)] and runs == ["a"]
    assert "not retried automatically" in model.requests[1].messages[-1]["content"]


async def test_after_a_timeout_the_run_continues() -> None:
    @tool(timeout=0.05)
    async def slow_report() -> str:
        """Builds the report slowly."""
        await asyncio.sleep(30)
        return "late"

    @tool
    def quick_summary() -> str:
        """A quick summary."""
        return "3 items"

    model = ScriptedModel([call("slow_report"), call("quick_summary"), "Summary: 3 items."])
    config = LoopConfig(retry=RetryPolicy(max_attempts=2, base_delay=0.01))
    result = await Agent(model, [slow_report, quick_summary], config=config).run("report")
    results = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert [(r.tool, r.ok, r.error_type, r.attempts) for r in results] == [
        ("slow_report", False, "timeout", 2),
        ("quick_summary", True, None, 1),
    ]
    assert '"error_type": "timeout"' in model.requests[1].messages[-1]["content"]
    assert result.status == "completed" and result.output == "Summary: 3 items."


# -- concurrency -----------------------------------------------------------------------------------


async def test_calls_in_one_turn_overlap_and_return_in_proposal_order() -> None:
    first_started, second_started = asyncio.Event(), asyncio.Event()

    @tool
    async def first() -> str:
        """Waits until the second has started: only finishes if both run at once."""
        first_started.set()
        await asyncio.wait_for(second_started.wait(), 2)
        await asyncio.sleep(0.02)  # and finishes last
        return "first"

    @tool
    async def second() -> str:
        """Waits until the first has started."""
        second_started.set()
        await asyncio.wait_for(first_started.wait(), 2)
        return "second"

    ex, _ = executor()
    executions = await ex.run_many([(first, args(first)), (second, args(second))])
    assert [e.result.data for e in executions] == ["first", "second"]


async def test_concurrency_is_bounded() -> None:
    running, peak = 0, 0

    @tool
    async def work(n: int) -> int:
        """One unit of work."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    ex, _ = executor(max_parallel=2)
    executions = await ex.run_many([(work, args(work, n=n)) for n in range(6)])
    assert [e.result.data for e in executions] == list(range(6))
    assert peak == 2


async def test_a_write_is_a_barrier_between_reads() -> None:
    log: list[str] = []
    store: dict[str, str] = {"x": "old"}

    @tool
    async def read(key: str, wait: float = 0.0) -> str:
        """Read a key."""
        log.append(f"start read {key}")
        await asyncio.sleep(wait)
        log.append(f"end read {key}")
        return store[key]

    @tool(side_effect="write")
    async def write(key: str, value: str) -> str:
        """Write a key."""
        log.append("start write")
        await asyncio.sleep(0.01)
        store[key] = value
        log.append("end write")
        return "written"

    ex, _ = executor()
    jobs = [
        (read, args(read, key="x", wait=0.02)),
        (read, args(read, key="x")),
        (write, args(write, key="x", value="new")),
        (read, args(read, key="x")),
    ]
    executions = await ex.run_many(jobs)
    assert [e.result.data for e in executions] == ["old", "old", "written", "new"]
    assert log.index("start write") > log.index("end read x")  # both earlier reads finished first
    assert log[:2] == ["start read x", "start read x"]  # the two reads before it overlapped
    assert log[-2:] == ["start read x", "end read x"]


async def test_the_agent_reports_parallel_results_in_proposal_order() -> None:
    @tool
    async def lookup(key: str, wait: float) -> str:
        """Look a key up."""
        await asyncio.sleep(wait)
        return key.upper()

    batch = [call("lookup", {"key": k, "wait": w}) for k, w in (("a", 0.06), ("b", 0.0), ("c", 0.03))]
    model = ScriptedModel([batch, "ABC"])
    result = await Agent(model, [lookup]).run("look up a, b, c")
    results = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert [r.preview for r in results] == [f'{{"ok": true, "data": "{k}"}}' for k in "ABC"]
    assistant = next(m for m in model.requests[1].messages if m["role"] == "assistant")
    proposed_ids = [c["id"] for c in assistant["tool_calls"]]
    tool_messages = [m for m in model.requests[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == proposed_ids
    assert [r.call_id for r in results] == proposed_ids


# -- validation -------------------------------------------------------------------------------------


def test_invalid_arguments_name_the_field_and_what_was_expected() -> None:
    @tool
    def book(room: int, day: str) -> str:
        """Book a room."""
        return "booked"

    result = validate_arguments(book, {"room": "twelve"})
    assert isinstance(result, ToolResult) and result.error_type == "invalid_arguments"
    assert "room" in (result.message or "") and "day" in (result.message or "")
    errors = {e["field"]: e for e in result.data["errors"]}
    assert errors["room"]["got"] == "twelve" and "integer" in errors["room"]["expected"]
    assert errors["day"]["kind"] == "missing" and "got" not in errors["day"]
    not_object = validate_arguments(book, ["room", 1])
    assert isinstance(not_object, ToolResult) and "JSON object" in (not_object.message or "")
