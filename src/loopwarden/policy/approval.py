"""Approval: a human decides before a `requires_approval` tool runs.

In process, an `ApprovalGate` passed to the Agent holds the decisions. When the model proposes
such a call, the run yields `ApprovalRequired` (call id, tool, arguments) and waits on the gate;
whoever consumes the events calls `gate.decide(call_id, approve, reason)` (before pulling the
next event, or from another task). An approved call runs; a denied one becomes a structured
`denied` result the model reads and can act on. No decision within the gate's timeout is a denial.

Without a gate the run pauses instead: it ends with status `paused`, stop reason
`approval_required` and, as its output, a `PendingApproval` — plain JSON data (the messages so
far and the pending turn's calls). `Agent.resume(pending, decisions)` continues it, in this
process or in another one after a restart (what a server persists). A resumed run starts its
detectors and totals afresh; the conversation, and so the model's view, is unchanged.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

from ..events import ApprovalDecided, ApprovalRequired, Event, EventStamper
from ..guard.fingerprint import args_hash
from ..models.base import ModelReply, ToolCall
from ..tools import ToolResult

if TYPE_CHECKING:
    from ..models.base import Message
    from ..proposals import Proposal


class Decision(BaseModel):
    approve: bool
    reason: str | None = None
    by: str | None = None


class PendingCall(BaseModel):
    call_id: str
    tool: str
    arguments: Any
    turn: int


class PendingApproval(BaseModel):
    """The resumable state of a run waiting for approval: serialisable as JSON."""

    run_id: str
    turn: int
    calls: list[PendingCall]
    messages: list[dict[str, Any]] = Field(default_factory=list)

    def replay(self) -> ModelReply:
        """The paused turn's calls (every call of it: none ran), as the model proposed them."""
        last = next(m for m in reversed(self.messages) if m.get("role") == "assistant" and m.get("tool_calls"))
        return ModelReply(
            tool_calls=[
                ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"].get("arguments") or "{}")
                for c in last["tool_calls"]
            ]
        )


def _resolve(future: asyncio.Future[Decision], decision: Decision) -> None:
    if not future.done():  # the wait may have timed out meanwhile
        future.set_result(decision)


@dataclass
class ApprovalGate:
    """Decisions on calls that need approval, by call id. One gate may serve many runs."""

    timeout: float | None = None
    """Seconds to wait for a decision; None waits as long as the run's budgets allow."""
    _decisions: dict[str, Decision] = field(default_factory=dict)
    _waiting: dict[str, asyncio.Future[Decision]] = field(default_factory=dict)
    pending: dict[str, PendingCall] = field(default_factory=dict)
    """Calls waiting for a decision right now."""

    def decide(self, call_id: str, approve: bool, reason: str | None = None, *, by: str | None = None) -> None:
        """Approve or deny a call (pending now, or announced ahead of time)."""
        decision = Decision(approve=approve, reason=reason, by=by)
        future = self._waiting.pop(call_id, None)
        if future is None or future.done():
            self._decisions[call_id] = decision
            return
        try:
            here = asyncio.get_running_loop() is future.get_loop()
        except RuntimeError:
            here = False
        if here:
            future.set_result(decision)
        else:  # decided on another thread (a web handler's worker): futures are not thread-safe
            future.get_loop().call_soon_threadsafe(_resolve, future, decision)

    @classmethod
    def with_decisions(cls, decisions: Mapping[str, bool | Decision], base: ApprovalGate | None = None) -> ApprovalGate:
        gate = base or cls()
        for call_id, decision in decisions.items():
            made = decision if isinstance(decision, Decision) else Decision(approve=decision)
            gate.decide(call_id, made.approve, made.reason, by=made.by)
        return gate

    def approve(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> None:
        self.decide(call_id, True, reason, by=by)

    def deny(self, call_id: str, reason: str | None = None, *, by: str | None = None) -> None:
        self.decide(call_id, False, reason, by=by)

    def expect(self, call: PendingCall) -> None:
        """Announce a call that will be waited on (it shows in `pending` from now)."""
        self.pending[call.call_id] = call

    async def wait(self, call: PendingCall) -> Decision:
        if call.call_id in self._decisions:
            self.pending.pop(call.call_id, None)
            return self._decisions.pop(call.call_id)
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._waiting[call.call_id] = future
        self.pending[call.call_id] = call
        try:
            async with asyncio.timeout(self.timeout):
                return await future
        except TimeoutError:
            return Decision(approve=False, reason=f"no decision within {self.timeout:g} s", by="timeout")
        finally:
            self._waiting.pop(call.call_id, None)
            self.pending.pop(call.call_id, None)


def denial_result(tool: str, decision: Decision) -> ToolResult:
    why = f": {decision.reason}" if decision.reason else ""
    return ToolResult.failure(
        "denied",
        f"the user denied this call to {tool}{why}. It was not run.",
        user_action="do not retry this call; continue without it or ask the user what to do instead",
    )


class _Conversation(Protocol):
    messages: list[Message]


def messages_of(owner: _Conversation) -> Callable[[], Sequence[Message]]:
    """`owner.messages` as they are when asked, through a weak reference: a run handing its
    ApprovalReview a closure over itself would be a reference cycle, and all the run kept (its
    state, the records, the guard's memory, the tools and what they hold) would wait for the
    cyclic GC to be freed instead of going with the run's last reference."""
    ref = weakref.ref(owner)

    def messages() -> Sequence[Message]:
        alive = ref()
        return alive.messages if alive is not None else []

    return messages


@dataclass
class ApprovalReview:
    """The loop's side of approval: announce, wait, apply the decision to each proposal."""

    gate: ApprovalGate | None
    stamp: EventStamper
    messages: Callable[[], Sequence[Message]]
    paused: PendingApproval | None = None
    """Set when calls need approval and there is no gate: the run must end paused."""
    waited: float = 0.0
    """Seconds spent waiting for people; not the agent's time, so not charged to the time budget."""

    @staticmethod
    def needed(proposals: Sequence[Proposal]) -> bool:
        """Whether any of these calls waits for approval (else `review` has nothing to do)."""
        for p in proposals:  # noqa: SIM110  # a loop, not any() of a generator: asked every turn
            if p.tool is not None and p.tool.requires_approval:
                return True
        return False

    async def review(self, proposals: Sequence[Proposal], turn: int) -> AsyncIterator[Event]:
        needing = [p for p in proposals if p.runnable and p.tool is not None and p.tool.requires_approval]
        if not needing:
            return
        calls = [PendingCall(call_id=p.call.id, tool=p.call.name, arguments=p.arguments, turn=turn) for p in needing]
        resume = PendingApproval(run_id=self.stamp.run_id, turn=turn, calls=calls, messages=list(self.messages()))
        if self.gate is None:
            self.paused = resume
        began = time.monotonic()  # from the announcement: people may decide before pulling the next event
        for call in calls:  # all at once, so they can be decided together and in any order
            if self.gate is not None:
                self.gate.expect(call)
            yield self.stamp(
                ApprovalRequired,
                turn=turn,
                call_id=call.call_id,
                tool=call.tool,
                arguments=call.arguments,
                args_hash=args_hash(call.arguments),
                resume=resume.model_dump(mode="json"),
            )
        if self.gate is None:
            return
        for p, call in zip(needing, calls, strict=True):
            decision = await self.gate.wait(call)
            yield self.stamp(
                ApprovalDecided,
                turn=turn,
                call_id=call.call_id,
                tool=call.tool,
                approved=decision.approve,
                reason=decision.reason,
                by=decision.by,
            )
            if not decision.approve:
                p.result = denial_result(call.tool, decision)
        self.waited += time.monotonic() - began
