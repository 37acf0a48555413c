"""Error loops (guard/error_loop.py), with commands run in real subprocesses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from eventcheck import shell_tool, verdicts_of
from loopwarden import Agent, Budgets, LoopConfig, RetryPolicy, ScriptedModel, ToolResult, call, tool
from loopwarden.events import NudgeInjected
from loopwarden.guard import ErrorLoopDetector, Rung
from loopwarden.state import CallRecord, RunState
from loopwarden.tools import http_status_failure


def test_the_same_command_failing_with_differing_text_three_times_is_flagged(tmp_path: Path) -> None:
    commands = ["cat notes-1.txt", "cat ./notes-2.txt", "cat notes-final.txt"]
    model = ScriptedModel([*(call("run", {"command": c}) for c in commands), "the notes are missing"])
    result = Agent(model, [shell_tool(tmp_path)]).run_sync("read the notes")
    texts = [e.message for e in result.events if e.type == "tool_call_finished"]  # type: ignore[attr-defined]
    assert len(set(texts)) == 3  # three different error texts from three real runs of cat
    [verdict] = verdicts_of(result.events, "error_loop")
    assert verdict.action == "nudged" and verdict.turn == 3 and verdict.count == 3
    assert "run failed 3 times in a row with exit_1" in verdict.reason
    assert len(verdict.evidence) == 3 and all("exit_1" in line for line in verdict.evidence)
    nudge = next(e for e in result.events if isinstance(e, NudgeInjected))
    assert nudge.detector == "error_loop" and "keeps failing" in nudge.text
    assert result.status == "completed"


def test_three_different_tools_failing_once_each_are_not_flagged(tmp_path: Path) -> None:
    @tool(result_parser=http_status_failure)  # its records are HTTP responses: opt in to reading failures there
    def fetch(url: str) -> dict[str, object]:
        """Fetch a URL."""
        return {"status_code": 404, "message": f"{url} not found"}

    @tool
    def parse(text: str) -> int:
        """Parse an integer."""
        return int(text)

    model = ScriptedModel(
        [
            call("run", {"command": "cat missing.txt"}),
            call("fetch", {"url": "http://127.0.0.1:9/x"}),
            call("parse", {"text": "twelve"}),
            "nothing worked, here is why",
        ]
    )
    result = Agent(model, [shell_tool(tmp_path), fetch, parse]).run_sync("x")
    assert [e.ok for e in result.events if e.type == "tool_call_finished"] == [False] * 3  # type: ignore[attr-defined]
    assert verdicts_of(result.events, "error_loop") == []
    assert result.status == "completed" and result.output == "nothing worked, here is why"


def test_the_same_call_failing_identically_is_caught_at_once(tmp_path: Path) -> None:
    same = call("run", {"command": "cat missing.txt"})
    model = ScriptedModel([same, same, "it is missing"])
    result = Agent(model, [shell_tool(tmp_path)]).run_sync("x")
    [verdict] = verdicts_of(result.events, "error_loop")
    assert verdict.turn == 2 and verdict.action == "nudged"
    assert "failed identically again" in verdict.reason


def test_a_tool_that_keeps_failing_is_narrowed_then_stopped(tmp_path: Path) -> None:
    calls = [call("run", {"command": f"cat missing-{i}.txt"}) for i in range(12)]
    config = LoopConfig(policy="fail", budgets=Budgets(max_tool_rounds=50))
    result = Agent(ScriptedModel(calls), [shell_tool(tmp_path)], config=config).run_sync("x")
    assert result.stop_reason == "error_loop" and result.status == "failed"
    actions = [v.action for v in verdicts_of(result.events, "error_loop")]
    assert actions[0] == "nudged" and "narrowed" in actions and actions[-1] == "stopped"


def test_a_success_in_between_resets_the_count(tmp_path: Path) -> None:
    (tmp_path / "present.txt").write_text("here\n")
    names = ["gone-1", "present", "gone-2", "present", "gone-3", "gone-4"]
    model = ScriptedModel([*(call("run", {"command": f"cat {n}.txt"}) for n in names), "done"])
    result = Agent(model, [shell_tool(tmp_path)]).run_sync("x")
    assert verdicts_of(result.events, "error_loop") == []  # never three failures of run in a row
    assert result.status == "completed"


def record(turn: int, message: str, *, cached: bool = False) -> CallRecord:
    return CallRecord(
        turn=turn,
        call_id=f"c{turn}",
        tool="compile",
        arguments={"path": "a.c"},
        fingerprint='compile:{"path":"a.c"}',
        result=ToolResult.failure("syntax_error", message, retryable=True),
        executed=True,
        cached=cached,
    )


@pytest.mark.parametrize(("second", "flagged"), [("line 13: syntax error", True), ("unexpected end of file", False)])
def test_a_rerun_failing_with_only_numbers_changed_is_an_identical_failure(second: str, flagged: bool) -> None:
    detector, state = ErrorLoopDetector(), RunState()
    assert detector.on_results(1, [record(1, "line 12: syntax error")], state) is None
    finding = detector.on_results(2, [record(2, second)], state)
    assert (finding is not None) is flagged
    if finding is not None:
        assert finding.rung == Rung.NUDGE and "identically" in finding.reason


def test_the_identical_command_rerun_with_changing_error_text_is_flagged_at_three(tmp_path: Path) -> None:
    """A retryable failure is never answered from the cache, so the very same command runs again
    and fails with new text each time (a timestamp); it is one error loop all the same."""

    @tool
    def fetch_status(url: str) -> ToolResult | str:
        """Ask a service for its status (through a real subprocess)."""
        script = 'echo "connection refused at $(date +%s%N)" >&2; exit 7'
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10)
        return ToolResult.failure("unavailable", done.stderr.strip(), retryable=True)

    same = call("fetch_status", {"url": "http://127.0.0.1:9/status"})
    config = LoopConfig(retry=RetryPolicy(max_attempts=1), disabled_detectors=frozenset({"no_progress"}))
    result = Agent(ScriptedModel([same, same, same, "the service is down"]), [fetch_status], config=config).run_sync(
        "x"
    )
    messages = [e.message for e in result.events if e.type == "tool_call_finished"]  # type: ignore[attr-defined]
    assert len(messages) == 3 and len(set(messages)) == 3
    # volatile numbers aside the failure is identical: flagged at once, and counted on
    early, third = verdicts_of(result.events, "error_loop")
    assert (early.turn, early.action) == (2, "nudged") and "failed identically again" in early.reason
    assert (third.turn, third.count) == (3, 3) and "failed 3 times in a row with unavailable" in third.reason
