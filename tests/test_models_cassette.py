"""Cassettes: record any model's traffic, replay it deterministically, and turn a recorded
badcase into an eval case in one command."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from loopwarden import Agent, Budgets, FunctionModel, Ladder, LoopConfig, ModelRequest, ScriptedModel, call, tool
from loopwarden.cli import build_app
from loopwarden.eval.case import load_case
from loopwarden.eval.runner import run_case
from loopwarden.models import ModelError
from loopwarden.models.cassette import RecordingModel, ReplayModel, load_cassette, save_cassette
from loopwarden.models.scripted import ReplyLike


@tool
def run_command(command: str) -> str:
    """Run a shell command.

    Args:
        command: the command line
    """
    return "nothing to commit, working tree clean" if command == "git status" else f"ran {command}"


def git_status_forever(request: ModelRequest) -> ReplyLike:
    return call("run_command", {"command": "git status"})


async def record_unguarded_collapse(path: Path, calls: int = 10) -> None:
    """What a production badcase looks like: an unguarded runtime, the model asking for the
    same command until the budget ends the run."""
    recorder = RecordingModel(FunctionModel(git_status_forever, name="collapser"))
    off = Ladder(nudge_at=10**9, narrow_at=10**9, stop_at=10**9)
    config = LoopConfig(ladder=off, budgets=Budgets(max_tool_rounds=calls, max_model_calls=calls), wrap_up=False)
    run = await Agent(recorder, [run_command], config=config, detectors=[]).run("Review my changes.")
    assert run.totals.model_calls == calls
    recorder.save(path)


async def test_recording_keeps_requests_replies_and_failures(tmp_path: Path) -> None:
    inner = ScriptedModel([call("run_command", {"command": "ls"}), ModelError("rate_limited", "429", retryable=True)])
    recorder = RecordingModel(inner)
    run = await Agent(recorder, [run_command]).run("list")
    assert run.stop_reason == "model_error"
    first, second = recorder.cassette.interactions
    assert first.reply is not None and first.reply.tool_calls[0].name == "run_command"
    assert [t["function"]["name"] for t in first.request.tools] == ["run_command"]
    assert second.reply is None and second.error is not None
    assert (second.error.kind, second.error.retryable) == ("rate_limited", True)
    assert second.request.messages[-1]["role"] == "tool"  # the history the model saw


async def test_replay_is_deterministic_and_raises_recorded_failures(tmp_path: Path) -> None:
    inner = ScriptedModel([call("run_command", {"command": "ls"}), "done", ModelError("timeout", "slow")])
    recorder = RecordingModel(inner)
    request = ModelRequest(messages=[{"role": "user", "content": "x"}])
    await recorder.complete(request)
    await recorder.complete(request)
    with pytest.raises(ModelError):
        await recorder.complete(request)
    path = save_cassette(recorder.cassette, tmp_path / "c.json")

    for _ in range(2):  # the same replies every time
        replay = ReplayModel(load_cassette(path))
        first = await replay.complete(request)
        assert first.tool_calls[0].arguments == '{"command": "ls"}'
        assert (await replay.complete(request)).text == "done"
        with pytest.raises(ModelError) as failed:
            await replay.complete(request)
        assert failed.value.kind == "timeout"
        with pytest.raises(ModelError) as exhausted:
            await replay.complete(request)
        assert exhausted.value.kind == "cassette_exhausted"
        assert replay.divergences == []


async def test_replay_notes_a_request_that_differs_from_the_recording() -> None:
    recorder = RecordingModel(ScriptedModel(["a", "b"]))
    await recorder.complete(ModelRequest(messages=[{"role": "user", "content": "x"}]))
    await recorder.complete(ModelRequest(messages=[{"role": "user", "content": "x"}]))
    replay = ReplayModel(recorder.cassette)
    await replay.complete(ModelRequest(messages=[{"role": "user", "content": "x"}]))
    changed = ModelRequest(messages=[{"role": "user", "content": "x"}, {"role": "user", "content": "nudge"}])
    assert (await replay.complete(changed)).text == "b"  # replay goes on
    assert [d.index for d in replay.divergences] == [1]


async def test_a_recorded_badcase_becomes_a_passing_regression_case_in_one_command(tmp_path: Path) -> None:
    cassette = tmp_path / "recorded" / "badcase.cassette.json"
    await record_unguarded_collapse(cassette)
    case_file = tmp_path / "cases" / "badcase.yaml"
    case_file.parent.mkdir()
    result = CliRunner().invoke(
        build_app(), ["eval-import", str(cassette), "--out", str(case_file), "--intent", "repo"]
    )
    assert result.exit_code == 0, result.output
    case = load_case(case_file)
    assert case.model.cassette == "../recorded/badcase.cassette.json"
    assert case.input == "Review my changes."
    (spec,) = case.tools
    assert spec.name == "run_command" and spec.by_args[0].args == {"command": "git status"}
    assert spec.by_args[0].results[0].data == "nothing to commit, working tree clean"

    first, second = await asyncio.gather(run_case(case), run_case(case))
    assert first.passed, first.reasons  # the default expectation: nothing executed twice, fewer calls
    assert first.model_calls < 10 and first.stop_reason == "repeated_call"
    assert first.model_dump() == second.model_dump()  # replay is deterministic


async def test_the_imported_case_fails_when_the_guard_is_off(tmp_path: Path) -> None:
    cassette = tmp_path / "badcase.cassette.json"
    await record_unguarded_collapse(cassette)
    case_file = tmp_path / "badcase.yaml"
    assert CliRunner().invoke(build_app(), ["eval-import", str(cassette), "-o", str(case_file)]).exit_code == 0
    result = await run_case(load_case(case_file), disabled=["repeated_call", "no_progress"])
    assert not result.passed


def test_importing_a_missing_cassette_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        build_app(), ["eval-import", str(tmp_path / "nope.json"), "-o", str(tmp_path / "x.yaml")]
    )
    assert result.exit_code == 2
    assert not (tmp_path / "x.yaml").exists()


async def test_a_cassette_file_stores_each_history_once_and_loads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "long.cassette.json"
    await record_unguarded_collapse(path, calls=30)
    loaded = load_cassette(path)
    histories = [len(i.request.messages) for i in loaded.interactions]
    assert histories == sorted(histories) and histories[-1] > 30  # full histories in memory
    full = loaded.model_dump_json(indent=1)
    assert path.stat().st_size * 5 < len(full)  # on disk, each message once
    save_cassette(loaded, tmp_path / "again.json")
    assert load_cassette(tmp_path / "again.json") == loaded


def test_a_corrupt_cassette_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"model": "m", "interactions": [{"request": {"messages": [], "prefix": 3}}]}')
    with pytest.raises(ValueError, match="shares 3 messages"):
        load_cassette(path)
