"""GuardSession: loopwarden's run driven step by step from outside gives the runtime's own
verdicts and events, at the same model calls, as an Agent run with the same model and tools."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from loopwarden import Agent, Budgets, FunctionModel, LoopConfig, ModelRequest, call, tool
from loopwarden.events import Event
from loopwarden.models import ModelReply, ToolCall
from loopwarden.session import NOT_RUN, GuardSession, ToolSpec
from loopwarden.tools import Tool

FILES = {"a.txt": "alpha", "b.txt": "beta"}


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: file name
    """
    if path not in FILES:
        raise FileNotFoundError(path)
    return FILES[path]


def finish(answer: str) -> str:
    """Give the final answer.

    Args:
        answer: the answer
    """
    return answer


Policy = Callable[[ModelRequest], ModelReply]


def _calls(*calls: tuple[str, dict[str, Any]], turn: int) -> ModelReply:
    return ModelReply(tool_calls=[call(n, a, id=f"t{turn}c{i}") for i, (n, a) in enumerate(calls)])


def collapse(request: ModelRequest) -> ModelReply:
    if not request.tools:
        return ModelReply(text="what I have")
    return _calls(("read_file", {"path": "a.txt"}), turn=len(request.messages))


def strict_collapse(request: ModelRequest) -> ModelReply:
    """The seed's collapsed model: the same call whatever it is offered or told."""
    return _calls(("read_file", {"path": "a.txt"}), turn=len(request.messages))


def parallel_repeats(request: ModelRequest) -> ModelReply:
    """Identical calls in one turn, an unknown tool, bad arguments, a failing call."""
    turn = len(request.messages)
    if turn > 12 or not request.tools:
        return ModelReply(text="done")
    return _calls(
        ("read_file", {"path": "a.txt"}),
        ("read_file", {"path": "a.txt"}),
        ("read_file", {"path": "zzz.txt"}),
        ("nope", {}),
        ("read_file", {"wrong": 1}),
        turn=turn,
    )


def forced_finish(request: ModelRequest) -> ModelReply:
    choice = request.tool_choice
    if isinstance(choice, dict):
        return _calls((choice["function"]["name"], {"answer": "alpha"}), turn=len(request.messages))
    return _calls(("read_file", {"path": "a.txt"}), turn=len(request.messages))


def _kinds(events: list[Event]) -> list[tuple[Any, ...]]:
    """What happened, without times, ids and durations."""
    out = []
    for e in events:
        d = e.model_dump(mode="json")
        out.append((d["type"], d.get("turn"), d.get("action"), d.get("detector"), d.get("tool"), d.get("stop_reason")))
    return out


def _tools(with_finish: bool) -> list[Tool]:
    tools = [tool(read_file)]
    return [*tools, tool(finish, terminal=True)] if with_finish else tools


async def _through_session(policy: Policy, config: LoopConfig, with_finish: bool) -> tuple[GuardSession, int]:
    """A framework's loop: it calls its model and runs its tools; the session guards."""
    tools = {t.name: t for t in _tools(with_finish)}
    specs = [ToolSpec(t.name, t.parameters, t.description, terminal=t.terminal) for t in tools.values()]
    session = GuardSession(specs, config)
    model_calls = 0
    turn = await session.next_turn("summarise a.txt")
    while turn is not None:
        model_calls += 1
        reply = policy(turn.request)
        for verdict in await session.propose(reply):
            if verdict.runs:
                try:
                    value: Any = tools[verdict.tool].fn(**json.loads(_call(reply, verdict.call_id).arguments))
                except Exception as error:
                    value = error
                await session.record(verdict.call_id, value)
            else:
                assert json.loads(await session.answer(verdict.call_id))
        turn = await session.next_turn("summarise a.txt")
    return session, model_calls


def _call(reply: ModelReply, call_id: str) -> ToolCall:
    return next(c for c in reply.tool_calls if c.id == call_id)


CASES = [
    (collapse, LoopConfig(), False),
    (strict_collapse, LoopConfig(policy="fail"), False),
    (strict_collapse, LoopConfig(), False),
    (parallel_repeats, LoopConfig(), False),
    (forced_finish, LoopConfig(), True),
    (collapse, LoopConfig(budgets=Budgets(max_model_calls=2)), False),
]


@pytest.mark.parametrize(("policy", "config", "with_finish"), CASES)
async def test_a_session_gives_the_runtimes_own_verdicts_and_events(
    policy: Policy, config: LoopConfig, with_finish: bool
) -> None:
    model = FunctionModel(policy)
    own = await Agent(model, _tools(with_finish), config=config, trace=False).run("summarise a.txt")
    session, model_calls = await _through_session(policy, config, with_finish)
    assert _kinds(session.events) == _kinds(own.events)
    assert model_calls == model.calls
    assert session.finished is not None and session.finished.stop_reason == own.stop_reason
    assert session.finished.output == own.output


async def test_the_turn_carries_the_nudge_the_narrowing_and_the_forced_tool() -> None:
    session, _ = await _through_session(collapse, LoopConfig(), False)
    nudges = session.nudges()
    assert len(nudges) == 1 and nudges[0].detector == "repeated_call"
    session2 = GuardSession([ToolSpec("read_file"), ToolSpec("finish", terminal=True)])
    turns = []
    turn = await session2.next_turn("x")
    while turn is not None and len(turns) < 6:
        turns.append(turn)
        verdicts = await session2.propose(_calls(("read_file", {"path": "a.txt"}), turn=turn.number))
        for v in verdicts:
            if v.runs:
                await session2.record(v.call_id, "alpha")
        turn = await session2.next_turn("x")
    assert [t.forced_tool for t in turns][:5] == [None, None, None, None, "finish"]
    assert [bool(t.injected) for t in turns][:5] == [False, False, False, True, False]  # the nudge, once
    await session2.close()


async def test_a_call_the_framework_never_ran_is_answered_not_waited_for() -> None:
    session = GuardSession([ToolSpec("read_file")])
    await session.next_turn("x")
    verdicts = await session.propose(_calls(("read_file", {"path": "a.txt"}), turn=1))
    assert [v.runs for v in verdicts] == [True]
    turn = await asyncio.wait_for(session.next_turn("x"), 30)  # the framework went on without running it
    assert turn is not None
    finished = [e for e in session.events if e.model_dump().get("type") == "tool_call_finished"]
    assert finished[0].model_dump()["error_type"] == NOT_RUN
    await session.close()


async def test_a_raising_tool_and_a_failure_in_the_data_are_results() -> None:
    session = GuardSession([ToolSpec("run")])
    await session.next_turn("x")
    verdicts = await session.propose(_calls(("run", {}), ("run", {"n": 2}), turn=1))
    await session.record(verdicts[0].call_id, RuntimeError("disk full"))
    await session.record(verdicts[1].call_id, '{"ok": false, "error": "exit_128", "message": "no upstream"}')
    await session.next_turn("x")
    results = [e.model_dump() for e in session.events if e.model_dump().get("type") == "tool_call_finished"]
    assert [(r["ok"], r["error_type"]) for r in results] == [(False, "tool_error"), (False, "exit_128")]
    await session.close()


def test_the_blocking_api_drives_a_session_from_sync_threads() -> None:
    session = GuardSession([ToolSpec("read_file")])
    outcome: list[Any] = []

    def framework() -> None:
        turn = session.next_turn_sync("x")
        n = 0
        while turn is not None:
            n += 1
            reply = ModelReply(text="done") if not turn.tools else _calls(("read_file", {"path": "a.txt"}), turn=n)
            for v in session.propose_sync(reply):
                if v.runs:
                    session.record_sync(v.call_id, "alpha")
                else:
                    outcome.append(session.answer_sync(v.call_id))
            turn = session.next_turn_sync("x")

    worker = threading.Thread(target=framework)
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    assert session.finished is not None
    assert any("repeated call" in text for text in outcome)


async def test_a_stopped_run_reports_why() -> None:
    session, _ = await _through_session(strict_collapse, LoopConfig(policy="fail"), False)
    assert session.stop_reason == "repeated_call"
    assert session.stop_message
    assert session.output_text == session.stop_message
