"""A run nobody watches keeps its step events as their dicts and builds them when read
(hotpath/kept.py): the events `result.events` gives are those the same run streams."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import pickle
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import loopwarden.models.scripted as scripted
from loopwarden import Agent, Budgets, FunctionModel, LoopConfig, ModelReply, RunResult, ToolCall, Usage, tool
from loopwarden.events import Event, GuardVerdict, ModelCalled, RunFinished, ToolCallFinished, ToolCallProposed
from loopwarden.guard.fingerprint import args_hash
from loopwarden.hotpath.kept import KeptEvents
from loopwarden.models.scripted import call


@tool(blocking=False)
def read(path: str) -> str:
    """Read a file."""
    return f"text of {path}"


def _script() -> Callable[[Any], Any]:
    """Allowed, refused (unknown tool, bad JSON), answered from the cache, two calls in one turn
    (the general way), a repeat the ladder steps in on, then the answer."""
    replies: list[Any] = [
        call("read", {"path": "a"}),
        call("nope"),
        call("read", "{not json"),
        call("read", {"path": "a"}),
        [call("read", {"path": "b"}), call("read", {"path": "c"})],
        call("read", {"path": "a"}),
        call("read", {"path": "a"}),
        "done",
    ]
    script = iter(replies)
    return lambda request: next(script, "done")


def _deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same clock readings and call ids in every run: two runs make equal events. Only
    loopwarden's own readings on the thread that runs the loop move the clock; any other reading
    is the real clock's. asyncio reads the clock each turn of its loop that has a timer, and a
    Postgres store writes from a worker thread: how many of those fall among the run's readings
    is the scheduler's choice (a run's times then differed by a tick or two: once in CI, twice in 32
    runs here under `stress-ng --cpu 2`; none in 30 since)."""
    ticks = itertools.count(1)
    loop_thread = threading.get_ident()
    real_time, real_perf_counter, real_monotonic = time.time, time.perf_counter, time.monotonic

    def ours() -> bool:
        caller = sys._getframe(2).f_globals.get("__name__", "")
        return caller.startswith("loopwarden") and threading.get_ident() == loop_thread

    def fake_time() -> float:
        return 1_700_000_000 + next(ticks) / 1000 if ours() else real_time()

    def fake_perf_counter() -> float:
        return next(ticks) / 1_000_000 if ours() else real_perf_counter()

    def fake_monotonic() -> float:
        return next(ticks) / 1_000_000 if ours() else real_monotonic()

    monkeypatch.setattr(time, "time", fake_time)
    monkeypatch.setattr(time, "perf_counter", fake_perf_counter)
    monkeypatch.setattr(time, "monotonic", fake_monotonic)
    monkeypatch.setattr(scripted, "_call_ids", itertools.count(1))


def _same(kept: list[Event], streamed: list[Event]) -> None:
    assert len(kept) == len(streamed)
    for a, b in zip(kept, streamed, strict=True):
        assert type(a) is type(b)
        assert list(a.__dict__.items()) == list(b.__dict__.items()), a
        assert a.model_fields_set == b.model_fields_set
        assert a.to_json() == b.to_json()


async def _streamed(agent: Agent[Any, Any], prompt: str) -> list[Event]:
    return [event async for event in agent.stream(prompt, run_id="r")]


@pytest.mark.parametrize("rounds", [None, 3])
def test_a_kept_runs_events_are_the_ones_the_same_run_streams(
    monkeypatch: pytest.MonkeyPatch, rounds: int | None
) -> None:
    """Every kind of step (allowed, refused, cached, two calls a turn, a nudge), ended by the
    answer or by a budget (the wrap-up's model call): the same events, field for field, in order."""
    import asyncio

    config = LoopConfig() if rounds is None else LoopConfig(budgets=Budgets(max_tool_rounds=rounds))
    _deterministic(monkeypatch)
    result = Agent(FunctionModel(_script()), [read], config=config).run_sync("x", run_id="r")
    assert type(result.__dict__["_events"]) is KeptEvents  # kept: nothing built yet
    kept = result.events
    _deterministic(monkeypatch)
    streamed = asyncio.run(_streamed(Agent(FunctionModel(_script()), [read], config=config), "x"))
    _same(kept, streamed)
    kinds = {type(e) for e in kept}
    assert {ModelCalled, ToolCallProposed, GuardVerdict, ToolCallFinished, RunFinished} <= kinds
    proposed = [e for e in kept if isinstance(e, ToolCallProposed)]
    assert [e.args_hash for e in proposed] == [args_hash(e.arguments) for e in proposed]  # hashed when built
    if rounds is None:
        assert {"allowed", "refused", "cached", "nudged"} <= {e.action for e in kept if isinstance(e, GuardVerdict)}
    else:
        assert result.stop_reason == "tool_round_budget"


def test_kept_events_are_built_once_and_the_result_behaves_as_a_list_of_them() -> None:
    result = Agent(FunctionModel(_script()), [read]).run_sync("x")
    count = len(result.__dict__["_events"])
    assert f"events=<{count}>" in repr(result) and type(result.__dict__["_events"]) is KeptEvents  # repr builds none
    events = result.events
    assert result.events is events and len(events) == count and all(isinstance(e, Event) for e in events)
    assert [e.seq for e in events] == list(range(1, count + 1))
    first = Agent(FunctionModel(_script()), [read]).run_sync("x")
    second = copy.copy(first)  # both hold the kept events: built once, whichever asks first
    assert second.events is first.events
    again = dataclasses.replace(result)
    assert again == result and again.events == events
    given = RunResult("r", "completed", "final_answer", "done", result.totals, events[:2], [], result.state)
    assert given.events == events[:2]
    assert [f.name for f in dataclasses.fields(RunResult)][4:7] == ["totals", "events", "messages"]


def test_a_traced_run_hands_each_event_on_as_it_is_made() -> None:
    seen: list[Event] = []
    result = Agent(FunctionModel(_script()), [read], trace=seen.append).run_sync("x")
    assert type(result.__dict__["_events"]) is list
    assert [id(e) for e in result.events] == [id(e) for e in seen]


def test_a_run_of_its_own_calls_keeps_what_the_model_sent() -> None:
    """A script reusing one ToolCall: each proposal still has its own id, kept or streamed."""
    same = ToolCall(id="x", name="read", arguments='{"path": "a"}')
    replies = iter([same, "done"])
    result = Agent(FunctionModel(lambda r: next(replies)), [read]).run_sync("x")
    (proposed,) = [e for e in result.events if isinstance(e, ToolCallProposed)]
    assert proposed.call_id != "x" and proposed.raw_arguments == '{"path": "a"}'


def test_a_reply_object_handed_back_again_changed_is_told_as_each_step_saw_it() -> None:
    """A model may hand back one `ModelReply` object again, changed: each kept `model_called`
    says what that step's reply said (its values are taken when the step keeps the event, not
    when the events are built after the run)."""
    reply = ModelReply(text="-", tool_calls=[call("read", {"path": "-"})], usage=Usage(prompt_tokens=1))
    steps = itertools.count()

    def model(request: Any) -> Any:
        step = next(steps)
        if step == 2:
            return "done"
        reply.text, reply.usage = f"step {step}", Usage(prompt_tokens=step + 10)
        reply.tool_calls = [call("read", {"path": f"p{step}"})]
        return reply

    result = Agent(FunctionModel(model), [read]).run_sync("x")
    assert type(result.__dict__["_events"]) is KeptEvents
    called = [e for e in result.events if isinstance(e, ModelCalled)]
    assert [(e.text, e.usage.prompt_tokens, e.n_tool_calls) for e in called] == [
        ("step 0", 10, 1),
        ("step 1", 11, 1),
        ("done", 10, 0),
    ]


def test_a_result_whose_events_were_not_read_pickles_and_copies_with_them() -> None:
    """A kept step holds what its events are made from (its proposal, the tool with its function):
    pickled or deep-copied, the result carries the events built instead."""
    result = Agent(FunctionModel(_script()), [read]).run_sync("x", run_id="r")
    assert type(result.__dict__["_events"]) is KeptEvents
    for again in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result)):
        assert [e.to_json() for e in again.events] == [e.to_json() for e in result.events]
        assert again.totals == result.totals and again.stop_reason == result.stop_reason


def test_a_calls_events_kept_as_one_item_count_and_build_as_three() -> None:
    """The loop's common turn keeps a call's proposed, verdict and finished events as one item
    (step_events.keep_call): the result still counts, numbers and orders every event."""
    result = Agent(FunctionModel(_script()), [read]).run_sync("x", run_id="r")
    items = result.__dict__["_events"].items
    assert any(type(item) is tuple and not isinstance(item[0], type) and item[1] == 3 for item in items)
    count = len(result.__dict__["_events"])
    events = result.events
    assert len(events) == count > len(items) and [e.seq for e in events] == list(range(1, count + 1))
    first = events[2:5]
    assert [type(e) for e in first] == [ToolCallProposed, GuardVerdict, ToolCallFinished]
    assert first[2].checklist_done == [] and first[0].ts <= first[1].ts <= first[2].ts


def test_an_event_told_between_a_calls_events_keeps_each_in_its_place() -> None:
    """Were an event told between a call's verdict and its result (nothing in the loop does;
    here the tool tells one through the run), the call's events are kept one by one around it."""
    from loopwarden.events import NudgeInjected
    from loopwarden.hooks import run_hook

    runs: list[Any] = []

    @tool(blocking=False)
    def noisy(path: str) -> str:
        """Read a file, telling something meanwhile."""
        stamp = runs[0].stamp
        stamp.kept.append(stamp(NudgeInjected, turn=1, detector="test", text=path))
        return "text"

    token = run_hook.set(runs.append)
    try:
        replies = iter([call("noisy", {"path": "a"}), "done"])
        result = Agent(FunctionModel(lambda r: next(replies)), [noisy]).run_sync("x")
    finally:
        run_hook.reset(token)
    kinds = [type(e) for e in result.events]
    assert kinds[2:6] == [ToolCallProposed, GuardVerdict, NudgeInjected, ToolCallFinished]
    assert [e.seq for e in result.events] == list(range(1, len(kinds) + 1))


def test_a_model_called_event_has_its_own_lists() -> None:
    """The run's offer is one list while it stands (Scope.offered) and a reply's empty notes are
    kept as None: each built `model_called` still has lists of its own, kept or streamed."""
    import asyncio

    for events in (
        Agent(FunctionModel(_script()), [read]).run_sync("x").events,
        asyncio.run(_streamed(Agent(FunctionModel(_script()), [read]), "x")),
    ):
        called = [e for e in events if isinstance(e, ModelCalled)]
        assert len(called) > 2 and all(e.notes == [] for e in called)
        assert called[0].tools_offered == called[1].tools_offered == ["read"]
        assert len({id(e.tools_offered) for e in called}) == len(called)
        assert len({id(e.notes) for e in called}) == len(called)
