"""A finished run is freed by reference counting alone: nothing it holds refers back to it, so its
state, records and the guard's memory go with its last reference instead of waiting for the cyclic
GC (which also made every collection walk them). The paused-for-approval path still reads the
conversation as it is when the call is proposed."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from loopwarden import Agent, ScriptedModel, call, tool
from loopwarden.events import RunFinished
from loopwarden.policy.approval import messages_of


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key
    """
    return f"value of {key}"


@tool(requires_approval=True, side_effect="write")
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: in euros
    """
    return "paid"


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _loopwarden_garbage() -> list[str]:
    """The types of loopwarden's objects only the cyclic GC would free (asyncio.run leaves its own)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("loopwarden")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def _drain(agent: Agent, prompt: str) -> tuple[weakref.ref[object], RunFinished]:
    run, stream = agent._start(prompt, "run-1")
    events = [event async for event in stream]
    assert isinstance(events[-1], RunFinished)
    return weakref.ref(run), events[-1]


@pytest.mark.usefixtures("no_cyclic_gc")
def test_a_finished_run_goes_with_its_last_reference() -> None:
    model = ScriptedModel([call("lookup", {"key": "a"}), call("lookup", {"key": "b"}), "done"])
    run, finished = asyncio.run(_drain(Agent(model, [lookup]), "look a and b up"))
    assert finished.status == "completed" and finished.totals.tool_executions == 2
    assert run() is None  # freed with gc disabled: no reference cycle kept it
    assert _loopwarden_garbage() == []  # and nothing of it was left for the collector


@pytest.mark.usefixtures("no_cyclic_gc")
def test_a_run_paused_for_approval_goes_too_and_its_pending_call_has_the_conversation() -> None:
    model = ScriptedModel([call("pay", {"amount": 5})])
    run, paused = asyncio.run(_drain(Agent(model, [pay]), "pay 5"))
    assert run() is None
    assert _loopwarden_garbage() == []
    assert paused.status == "paused" and paused.stop_reason == "approval_required"
    pending = paused.output
    assert [m["role"] for m in pending["messages"]] == ["user", "assistant"]
    assert pending["messages"][0]["content"] == "pay 5"


def test_messages_of_reads_the_conversation_when_asked() -> None:
    class Conversation:
        def __init__(self) -> None:
            self.messages: list[dict[str, object]] = [{"role": "user", "content": "hi"}]

    owner = Conversation()
    read = messages_of(owner)  # type: ignore[arg-type]
    owner.messages = [*owner.messages, {"role": "assistant", "content": "hello"}]  # replaced, as resume does
    assert [m["content"] for m in read()] == ["hi", "hello"]
    del owner
    assert list(read()) == []  # the owner gone: nothing to read, and nothing kept it alive
