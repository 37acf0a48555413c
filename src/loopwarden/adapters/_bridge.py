"""What every adapter does around a framework's model call and tool call, written once.

The steps are generators that yield what they need done (an `Op` on the session, an `Ask` to
call the framework's model, a `RunTool` to run the framework's tool) and get its result back, so
the same logic serves a framework's sync and async paths (`drive_sync`, `drive`).

Messages the runtime adds to the history (a nudge, the wrap-up request) are kept here with the
place in the framework's history where they belong, and shown to every later model call there:
the framework's own history never holds them, yet the model reads what a loopwarden run's would.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import LoopwardenError
from ..models.base import ModelReply, ToolCall, Usage
from ..session import CallVerdict, GuardSession, ToolSpec, Turn
from ..tools import ToolResult

R = TypeVar("R")  # a framework's model response
T = TypeVar("T")


class GuardStopped(LoopwardenError):
    """The guard ended a run whose framework wants structured output, which its stop message is not."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        reason = summary.get("stop_reason") or summary.get("status")
        super().__init__(f"loopwarden stopped the run ({reason}): {summary.get('message') or 'no answer'}")


@dataclass
class Op:
    """A GuardSession method to call (`name` async, `name + "_sync"` blocking)."""

    name: str
    args: tuple[Any, ...] = ()


@dataclass
class Ask:
    """Call the framework's model the way `turn` says: only its tools, its tool choice, the
    runtime's messages at their places, then `follow` (replies and requests within this call)."""

    turn: Turn
    follow: list[tuple[str, list[str]]]
    """(the model's text reply, the runtime's requests after it): a reply the runtime did not
    accept as the answer, asked again within the same framework model call."""


@dataclass
class RunTool:
    """Run the framework's tool; the driver sends back (ok, value or exception)."""


@dataclass
class Keep(Generic[R]):
    """The framework's own response stands."""

    response: R


@dataclass
class Answer:
    """Replace the framework's result by this text (the run's answer, a stop, a cached result)."""

    text: str
    error: bool = False


Step = Op | Ask | RunTool
Flow = Generator[Step, Any, T]


@dataclass
class RunBridge:
    """One framework run under one guard session."""

    session: GuardSession
    injected: list[tuple[int, str]] = field(default_factory=list)
    """(position in the framework's history, text) of each message the runtime added."""
    turns_seen: set[int] = field(default_factory=set)

    def model_call(self, prompt: str, history_len: int) -> Flow[Keep[Any] | Answer]:
        """One model call of the framework: the run's turn, the call, the verdicts. The response
        stands when its calls are to run (or it is the accepted answer); when the run has
        ended, the framework gets the run's answer (or its stop message) instead."""
        turn: Turn | None = yield Op("next_turn", (prompt,))
        if turn is not None and turn.number not in self.turns_seen:
            self.turns_seen.add(turn.number)
            self.injected += [(history_len, text) for text in turn.injected]
        follow: list[tuple[str, list[str]]] = []
        response: Any = None
        reply: ModelReply | None = None
        while turn is not None:
            response, reply = yield Ask(turn, list(follow))
            assert reply is not None
            yield Op("propose", (reply,))
            if reply.tool_calls and turn.tools and not self.session.ended:
                return Keep(response)
            if self.session.ended:
                break
            turn = yield Op("next_turn", (prompt,))  # the reply was no answer yet: asked again
            if turn is not None:
                self.turns_seen.add(turn.number)
                follow.append((reply.text or "", turn.injected))
        finished = self.session.finished
        answer = reply.text if reply is not None and not reply.tool_calls else None
        if finished is not None and finished.status == "completed" and answer is not None and finished.output == answer:
            return Keep(response)  # the model's answer, accepted as it is
        return Answer(self.session.output_text)

    def tool_call(self, call_id: str, *, returned: bool = False) -> Flow[Keep[Any] | Answer]:
        """One tool call of the framework: run it (and tell the session what it returned) or
        answer it with what the guard decided. `returned`: the framework gives the tool's own
        return value (not the text its model reads), recorded as it is (`as_returned`)."""
        verdict = self.verdict(call_id)
        if verdict is None or verdict.runs:
            ok, value = yield RunTool()
            if verdict is not None:
                yield Op("record", (call_id, as_returned(value) if returned and ok else value))
            if not ok:
                raise value
            return Keep(value)
        content: str = yield Op("answer", (call_id,))
        return Answer(content, error=verdict.action in ("refused", "stopped"))

    def verdict(self, call_id: str) -> CallVerdict | None:
        return self.session.verdicts.get(call_id)

    def history(self, items: list[T], make: Callable[[str], T]) -> list[T]:
        """The framework's history with the runtime's messages at their places."""
        if not self.injected:
            return items
        out: list[T] = []
        pending = iter(sorted(self.injected, key=lambda x: x[0]))
        nxt = next(pending, None)
        for i, item in enumerate([*items, None]):
            while nxt is not None and nxt[0] <= i:
                out.append(make(nxt[1]))
                nxt = next(pending, None)
            if i < len(items):
                out.append(item)  # type: ignore[arg-type]
        return out

    def summary(self) -> dict[str, Any]:
        """What the framework's state keeps of the guard: how the run ended and why."""
        finished = self.session.finished
        return {
            "run_id": self.session.run_id,
            "status": finished.status if finished else "running",
            "stop_reason": self.session.stop_reason,
            "message": self.session.stop_message if self.session.stop_reason else "",
            "detectors": list(finished.detectors) if finished else [],
            "nudges": [n.text for n in self.session.nudges()],
        }


def as_returned(value: Any) -> Any:
    """A tool's own return value as loopwarden's tool layer takes it: a string stays the string
    (`GuardSession.record` would read a JSON string as JSON, as it must for the text a framework
    hands its model), anything else goes through the result parser."""
    return ToolResult.success(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class ToolRoles:
    """How a framework's tools count for the guard, by name (an adapter's constructor options)."""

    terminal: frozenset[str] = frozenset()
    repeatable: frozenset[str] = frozenset()
    write: frozenset[str] = frozenset()

    def spec(self, name: str, parameters: dict[str, Any] | None, description: str = "") -> ToolSpec:
        return ToolSpec(
            name,
            parameters,
            description,
            terminal=name in self.terminal,
            repeatable=name in self.repeatable,
            side_effect="write" if name in self.write else "read",
        )


def drive_sync(flow: Flow[T], session: GuardSession, ask: Callable[[Ask], Any], run: Callable[[], Any]) -> T:
    value: Any = None
    while True:
        try:
            step = flow.send(value)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if isinstance(step, Op):
            value = getattr(session, step.name + "_sync")(*step.args)
        elif isinstance(step, Ask):
            value = ask(step)
        else:
            try:
                value = (True, run())
            except Exception as error:  # the tool's own failure: the session hears of it, the framework too
                value = (False, error)


async def drive(
    flow: Flow[T], session: GuardSession, ask: Callable[[Ask], Awaitable[Any]], run: Callable[[], Awaitable[Any]]
) -> T:
    value: Any = None
    while True:
        try:
            step = flow.send(value)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if isinstance(step, Op):
            value = await getattr(session, step.name)(*step.args)
        elif isinstance(step, Ask):
            value = await ask(step)
        else:
            try:
                value = (True, await run())
            except Exception as error:
                value = (False, error)


def reply_of(text: str | None, calls: list[tuple[str | None, str, Any]], usage: Usage | None = None) -> ModelReply:
    """A framework model's reply as loopwarden's: (id, name, arguments as a dict or JSON text)."""
    tool_calls = [
        ToolCall(
            id=call_id or f"call_{uuid.uuid4().hex[:12]}",
            name=name,
            arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str),
        )
        for call_id, name, args in calls
    ]
    return ModelReply(text=text or None, tool_calls=tool_calls, usage=usage or Usage())


class Bridges:
    """The runs in progress of one adapter instance, by run id; the oldest are let go past
    `keep` (a run its framework abandoned never tells the adapter it ended)."""

    def __init__(self, keep: int = 256) -> None:
        self._runs: OrderedDict[str, RunBridge] = OrderedDict()
        self._keep = keep

    def add(self, bridge: RunBridge) -> RunBridge:
        self._runs[bridge.session.run_id] = bridge
        while len(self._runs) > self._keep:
            _, old = self._runs.popitem(last=False)
            old.session.close_soon()
        return bridge

    def get(self, run_id: str | None) -> RunBridge | None:
        return self._runs.get(run_id) if run_id else None

    def pop(self, run_id: str | None) -> RunBridge | None:
        return self._runs.pop(run_id, None) if run_id else None
