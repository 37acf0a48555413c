"""No progress (guard/no_progress.py): varied calls with the same results are flagged,
segmented reads of new content are not. Commands run in real subprocesses on a real git repo."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventcheck import shell_tool, verdicts_of
from helpers import require_binary
from loopwarden import Agent, ChecklistItem, FunctionModel, LoopConfig, ModelRequest, ScriptedModel, call, tool
from loopwarden.guard.no_progress import content_hash
from loopwarden.models import ToolCall
from loopwarden.tools import ToolResult

STATUS_VARIANTS = [
    "git status",
    "git --no-pager status",
    "git status --long",
    "git -c color.ui=never status",
    "git -C . status",
    "git status .",
    "git status --untracked-files=normal",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git = require_binary("git")
    for args in (["init", "-q"], ["config", "user.email", "t@example.org"], ["config", "user.name", "t"]):
        subprocess.run([git, *args], cwd=tmp_path, check=True)
    (tmp_path / "draft.md").write_text("# notes\n")
    subprocess.run([git, "add", "draft.md"], cwd=tmp_path, check=True)
    subprocess.run([git, "commit", "-q", "-m", "start"], cwd=tmp_path, check=True)
    return tmp_path


def test_varied_commands_with_identical_results_are_flagged(repo: Path) -> None:
    model = ScriptedModel([call("run", {"command": c}) for c in STATUS_VARIANTS])
    result = Agent(model, [shell_tool(repo)], config=LoopConfig(policy="fail")).run_sync("what changed?")
    outputs = [e.preview for e in result.events if e.type == "tool_call_finished" and e.executed]  # type: ignore[attr-defined]
    assert len(outputs) == 5 and len(set(outputs)) == 1  # every variant printed the same status
    assert [(v.action, v.turn) for v in verdicts_of(result.events, "no_progress")] == [
        ("nudged", 4),
        ("narrowed", 5),
        ("stopped", 6),
    ]
    assert result.stop_reason == "no_progress" and result.status == "failed"
    assert "3 rounds in a row returned nothing new" in verdicts_of(result.events, "no_progress")[0].reason
    assert any("git --no-pager status" in line for line in verdicts_of(result.events, "no_progress")[0].evidence)


def test_the_same_commands_are_fine_when_the_results_change(repo: Path) -> None:
    diffs = ["git diff", "git --no-pager diff", "git diff --no-color", "git -c color.ui=never diff", "git diff ."]
    calls = []
    for i, command in enumerate(diffs):
        calls += [call("run", {"command": f"echo line {i} >> draft.md"}), call("run", {"command": command})]
    model = ScriptedModel([*calls, "five edits made"])
    result = Agent(model, [shell_tool(repo)]).run_sync("edit and check")
    assert verdicts_of(result.events, "no_progress") == []
    assert result.status == "completed"


def test_segmented_reads_of_new_content_are_not_flagged(tmp_path: Path) -> None:
    text = "\n".join(f"measurement {i}: {i * 0.37:.2f} V" for i in range(200))
    (tmp_path / "log.txt").write_text(text)

    @tool
    def read_lines(path: str, offset: int = 0, limit: int = 20) -> str:
        """Read lines of a file."""
        return "\n".join((tmp_path / path).read_text().splitlines()[offset : offset + limit])

    def reader(request: ModelRequest) -> ToolCall | str:
        n = sum(1 for m in request.messages if m["role"] == "tool")
        return call("read_lines", {"path": "log.txt", "offset": 20 * n}) if n < 10 else "read all 200 lines"

    result = Agent(FunctionModel(reader), [read_lines]).run_sync("read log.txt")
    assert verdicts_of(result.events, "no_progress") == []
    assert result.status == "completed" and result.totals.tool_executions == 10


def test_results_that_differ_only_in_volatile_fields_are_not_new() -> None:
    calls = [call("job_info", {"job": name}) for name in ("build", "build-1", "build:latest", "builds/1", "b")]
    stamps = iter(range(5))

    @tool
    def job_info(job: str) -> dict[str, object]:
        """Describe a job."""
        i = next(stamps)
        return {
            "state": "queued",
            "id": f"3f2a9c1e-0000-4000-8000-00000000000{i}",
            "checked_at": f"2026-11-29T21:0{i}:00Z",
            "message": f"queued since 2026-11-29 21:0{i}:13, took {i * 12} ms",
        }

    result = Agent(ScriptedModel([*calls, "still queued"]), [job_info]).run_sync("x")
    assert [v.action for v in verdicts_of(result.events, "no_progress")] == ["nudged", "narrowed"]


def test_a_checklist_item_done_is_progress_even_with_a_seen_result() -> None:
    @tool
    def check(step: str) -> str:
        """Run a check."""
        return "ok"

    steps = ["lint", "types", "tests", "docs", "build"]
    checklist = [ChecklistItem(name=s, tool="check", when=lambda args, r, s=s: args["step"] == s) for s in steps]
    model = ScriptedModel([*(call("check", {"step": s}) for s in steps), "all green"])
    result = Agent(model, [check], checklist=checklist).run_sync("x")
    assert verdicts_of(result.events, "no_progress") == []
    assert result.stop_reason == "checklist_complete" and result.output == "all green"


def test_rounds_answered_from_the_cache_are_not_counted() -> None:
    @tool
    def read(path: str) -> str:
        """Read."""
        return "same"

    same = call("read", {"path": "a"})
    result = Agent(ScriptedModel([same] * 5), [read], config=LoopConfig(policy="fail")).run_sync("x")
    assert verdicts_of(result.events, "no_progress") == []
    assert result.stop_reason == "repeated_call"


@given(st.integers(0, 2**40), st.uuids(), st.datetimes(min_value=datetime(1970, 1, 1)))
def test_volatile_values_do_not_change_the_hash(n: int, uid: object, when: object) -> None:
    base = ToolResult.success({"rows": 3, "request_id": "r1", "note": "done at 2020-01-01T00:00:00"})
    other = ToolResult.success({"rows": 3, "request_id": str(uid), "note": f"done at {when:%Y-%m-%dT%H:%M:%S}"})  # type: ignore[str-format]
    assert content_hash(base) == content_hash(other)
    assert content_hash(base) != content_hash(ToolResult.success({"rows": 4, "note": "done"}))
