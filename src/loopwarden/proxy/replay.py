"""The guard's state, derived from the request itself: a real loopwarden run is replayed over the
conversation's current task (its model is the history, then the live upstream call; its tools
answer with the results the client already sent), so every verdict, nudge, narrowing and stop is
the one the in-process runtime would give at the same point.

The first model call the history cannot answer is the live one: the run's request at that point
(its messages with any nudge it injected, the tools it still offers, the tool_choice it forces) is
mapped back onto the client's own request and sent upstream. The run goes on just far enough to
give a verdict on every call in the live reply, and no further: the client executes those calls.
There the run is paused and kept (resume.py): the client's next request, carrying those calls'
results, resumes it instead of replaying the whole task again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..agent import Agent
from ..config import LoopConfig
from ..events import Event
from ..guard.budget import Price
from ..models.base import Message, ModelReply, ModelRequest, Usage
from ..tools import Tool, ToolResult, business_failure
from ..tools.schema import tool_from_schema
from .conversation import ConversationLimits, spent_before, with_conversation
from .history import BadRequest, Conversation, reply_from_message
from .resume import HistoryHash, ResumeCache, history_hashes

Upstream = Callable[[dict[str, Any]], Awaitable[ModelReply]]
"""Sends one request body upstream and returns the reply (raising to pass an upstream error on)."""


@dataclass
class WirePolicy:
    """What the proxy knows about the client's tools, and how it guards them."""

    config: LoopConfig = field(default_factory=LoopConfig)
    terminal_tools: frozenset[str] = frozenset()
    """Tools that finish the client's task: narrowing forces `tool_choice` to one of them."""
    repeatable_tools: frozenset[str] = frozenset()
    """Polling tools: identical calls are legitimate and never counted."""
    write_tools: frozenset[str] = frozenset()
    """Tools with side effects: a successful call makes remembered results stale."""
    price: Price | None = None
    """The upstream's price per million tokens, whatever model the client names (`--price`):
    the cost budget counts the estimated tokens at it."""
    conversation: ConversationLimits = field(default_factory=ConversationLimits)
    """Budgets over the whole conversation (conversation.py), next to the per-task ones."""

    def config_for(self, model: str, opening: list[Message] | None = None) -> LoopConfig:
        budgets = self.config.budgets
        if self.price is not None:
            budgets = replace(budgets, prices={**budgets.prices, model: self.price})
        if self.conversation.any():
            before = spent_before(opening or [], self.price)
            budgets = with_conversation(budgets, self.conversation, before)
        return self.config if budgets is self.config.budgets else replace(self.config, budgets=budgets)


@dataclass
class Verdict:
    call_id: str
    tool: str
    action: str
    reason: str


@dataclass
class Outcome:
    """What the replay decided for one request."""

    events: list[Event]
    reply: ModelReply | None
    """The live upstream reply, or None when the run ended before it needed one."""
    forwarded: dict[str, Any] | None
    """The request body as sent upstream."""
    verdicts: list[Verdict]
    """The guard's verdict on each call of the live reply."""
    stop_reason: str | None
    """Set when the guard stopped the task: the client gets a stop message instead of the calls."""
    stop_message: str = ""
    final_output: Any = None
    fresh: int = 0
    """Index of the first event this request told first (the ones before it the previous request
    of the conversation told already)."""

    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None


class _LiveTurnOver(Exception):
    """Raised into the replayed run when it asks for a second live model call: the client has
    not answered the first one yet, so the replay ends there."""


class _Session:
    """What a run answers from: the request's history, then its live call. A paused run is
    rebound to the request that resumes it (resume.py)."""

    def __init__(self, conversation: Conversation, body: dict[str, Any], upstream: Upstream) -> None:
        self.served = 0
        """Replies handed to the run so far, the live one included."""
        self.rebind(conversation, body, upstream)

    def rebind(self, conversation: Conversation, body: dict[str, Any], upstream: Upstream) -> None:
        self.conversation, self.body, self.upstream = conversation, body, upstream
        self.live_reply: ModelReply | None = None
        self.forwarded: dict[str, Any] | None = None


class _ReplayModel:
    """The conversation's assistant turns in order, then one live call upstream.

    Every turn reaches the run as the client's echo of it will read (text and calls, usage
    estimated from the request), the live one too: the run's state is then a function of the
    history alone, the same whether the turn was live, replayed, or resumed."""

    def __init__(self, name: str, session: _Session) -> None:
        self.name = name
        self.session = session

    async def complete(self, request: ModelRequest) -> ModelReply:
        session = self.session
        replies = session.conversation.replies
        if session.served < len(replies):
            reply = replies[session.served]
        elif session.live_reply is not None:
            raise _LiveTurnOver
        else:
            session.forwarded = forward_body(session.body, session.conversation, request)
            session.live_reply = await session.upstream(session.forwarded)
            reply = as_echoed(session.live_reply)
        session.served += 1
        return reply.model_copy(update={"usage": _estimated_usage(request, reply)})


def as_echoed(reply: ModelReply) -> ModelReply:
    """A live reply as the history of the next request will show it."""
    return reply_from_message(reply.assistant_message())


def _estimated_usage(request: ModelRequest, reply: ModelReply) -> Usage:
    """Usage of a turn, estimated (the client does not send usage back, so a replayed turn has no
    other): about four characters a token."""
    sent = sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in request.messages)
    said = len(reply.text or "") + sum(len(c.name) + len(c.arguments) for c in reply.tool_calls)
    return Usage(prompt_tokens=sent // 4, completion_tokens=max(1, said // 4))


def wire_tools(body: dict[str, Any], session: _Session, policy: WirePolicy) -> list[Tool]:
    """The client's declared tools, each answering with the client's own results."""
    tools: list[Tool] = []
    seen: set[str] = set()
    raw_tools = body.get("tools") or []
    if not isinstance(raw_tools, list):
        raise BadRequest("'tools' must be a list", "tools")
    for i, raw in enumerate(raw_tools):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue  # not a function tool (a hosted tool type): passed upstream, not guarded
        name = function["name"]
        if name in seen:
            raise BadRequest(f"tools[{i}]: the tool name {name!r} is declared twice", f"tools[{i}]")
        seen.add(name)
        parameters = function.get("parameters")
        tools.append(
            tool_from_schema(
                name,
                parameters if isinstance(parameters, dict) else None,
                _client_result(session, name),
                description=str(function.get("description") or name),
                terminal=name in policy.terminal_tools,
                repeatable=name in policy.repeatable_tools,
                side_effect="write" if name in policy.write_tools else "read",
                result_parser=business_failure,
                timeout=None,
            )
        )
    return tools


def _client_result(session: _Session, name: str) -> Callable[..., Awaitable[ToolResult]]:
    async def answer(**arguments: Any) -> ToolResult:  # async: no worker thread for a lookup
        content = session.conversation.take_result(session.served - 1, name, arguments)
        if content is None:
            return ToolResult.failure("no_result", f"the client sent no result for this call of {name}")
        return ToolResult.success(_parsed(content))

    return answer


def _parsed(content: str) -> Any:
    try:
        return json.loads(content)
    except (json.JSONDecodeError, RecursionError):
        return content


@dataclass
class _Paused:
    """A run stopped after its verdicts on a live reply, waiting for the client's results."""

    stream: AsyncIterator[Event]
    session: _Session
    events: list[Event]
    size: int

    async def aclose(self) -> None:
        await self.stream.aclose()  # type: ignore[attr-defined]


def _context(body: dict[str, Any], policy: WirePolicy, run_id: str) -> list[Any]:
    """What shapes a run besides its history: a paused run resumes only where all of it matches."""
    sets = (policy.terminal_tools, policy.repeatable_tools, policy.write_tools)
    return [run_id, body.get("model"), body.get("tools"), *(sorted(s) for s in sets)]


async def replay(
    body: dict[str, Any],
    conversation: Conversation,
    policy: WirePolicy,
    upstream: Upstream,
    *,
    run_id: str,
    cache: ResumeCache | None = None,
) -> Outcome:
    """Replay the task (or resume it where the previous request left it), make the live call,
    and return the guard's decision on it."""
    running: HistoryHash | None = None
    paused = None
    if cache is not None:
        prefix, running = history_hashes(
            _context(body, policy, run_id), conversation.opening, conversation.task, conversation.replies
        )
        paused = cache.take(prefix) if prefix is not None else None
    fresh, history_turn = 0, None
    if isinstance(paused, _Paused):
        session, stream, events = paused.session, paused.stream, paused.events
        session.rebind(conversation, body, upstream)
        fresh = len(events)
    else:
        session, events = _Session(conversation, body, upstream), []
        model = _ReplayModel(str(body.get("model") or "upstream"), session)
        config = policy.config_for(model.name, conversation.opening)
        agent = Agent(model, wire_tools(body, session, policy), config=config, trace=False)
        stream = agent.stream(list(conversation.opening), run_id=run_id)
    live_turn: int | None = None
    live_calls = 0
    verdicts: list[Verdict] = []
    keep = False
    try:
        async for event in stream:
            events.append(event)
            data = event.model_dump(mode="json")
            kind = data.get("type")
            if (
                kind == "model_called"
                and session.live_reply is None
                and 0 < session.served == len(conversation.replies)
            ):
                history_turn, fresh = data["turn"], len(events)  # the last turn the previous request saw live
            elif kind == "guard_verdict" and data.get("call_id") and data["turn"] == history_turn:
                fresh = len(events)
            if session.live_reply is not None and live_turn is None and kind == "model_called":
                live_turn, live_calls = data["turn"], len(session.live_reply.tool_calls)
            if live_turn is not None and kind == "guard_verdict" and data.get("call_id") and data["turn"] == live_turn:
                verdicts.append(Verdict(data["call_id"], data.get("tool") or "", data["action"], data["reason"]))
                if len(verdicts) == live_calls:
                    # every live call has its verdict: the client runs them, not us; the run
                    # waits here for their results (unless the guard stopped the task)
                    keep = running is not None and all(v.action != "stopped" for v in verdicts)
                    break
            if kind == "run_finished":
                outcome = _finished(events, session, verdicts, data)
                outcome.fresh = fresh
                return outcome
    except _LiveTurnOver:
        pass
    finally:
        if not keep:
            await stream.aclose()  # type: ignore[attr-defined]
    if keep and cache is not None and running is not None and session.live_reply is not None:
        running.add_reply(as_echoed(session.live_reply))
        await cache.put(running.digest(), _Paused(stream, session, list(events), running.size))
    stopped = next((v for v in verdicts if v.action == "stopped"), None)
    stop_reason, stop_message = ("repeated_call", stopped.reason) if stopped is not None else (None, "")
    return Outcome(events, session.live_reply, session.forwarded, verdicts, stop_reason, stop_message, fresh=fresh)


def _finished(events: list[Event], session: _Session, verdicts: list[Verdict], data: dict[str, Any]) -> Outcome:
    """The run ended. With the live reply as its answer, that reply goes to the client as it is;
    ended before any live call (a stop found in the history), the client is told why."""
    if session.live_reply is not None and data.get("status") == "completed":
        return Outcome(events, session.live_reply, session.forwarded, verdicts, None, final_output=data.get("output"))
    if session.live_reply is not None and data.get("output"):
        return Outcome(events, session.live_reply, session.forwarded, verdicts, None, final_output=data.get("output"))
    reason = str(data.get("stop_reason") or "stopped")
    phase = next((e for e in reversed(events) if e.model_dump().get("type") == "phase_ended"), None)
    message = str(phase.model_dump().get("message")) if phase is not None else reason
    return Outcome(events, session.live_reply, session.forwarded, verdicts, reason, message, data.get("output"))


# -- the run's request, mapped back onto the client's ---------------------------------------------


def forward_body(body: dict[str, Any], conversation: Conversation, request: ModelRequest) -> dict[str, Any]:
    """The client's body with the run's shaping: its injected messages in place, the tools it
    still offers (in the client's own declarations), the tool_choice it forces. Everything else,
    unknown fields included, goes upstream as the client sent it."""
    out = dict(body)
    out["messages"] = merge_messages(conversation, request.messages)
    client_tools = body.get("tools")
    if not isinstance(client_tools, list) or not client_tools:
        return out
    offered = {t["function"]["name"] for t in request.tools}
    if not request.tools:  # a wrap-up call: tools stay declared (the history uses them), none may be called
        out["tool_choice"] = "none"
        return out
    kept = [t for t in client_tools if not _is_function(t) or t["function"]["name"] in offered]
    if not any(_is_function(t) for t in kept):  # every tool narrowed away: declared, none callable
        out["tool_choice"] = "none"
        return out
    if len(kept) != len(client_tools):
        out["tools"] = kept
    if isinstance(request.tool_choice, dict) or request.tool_choice in ("required", "none"):
        out["tool_choice"] = request.tool_choice
    elif _forced_name(body.get("tool_choice")) not in (None, *offered):
        out["tool_choice"] = "auto"  # the client forces a tool the guard narrowed away: not any more
    return out


def _forced_name(choice: Any) -> str | None:
    function = choice.get("function") if isinstance(choice, dict) else None
    return str(function.get("name")) if isinstance(function, dict) else None


def merge_messages(conversation: Conversation, run_messages: list[Message]) -> list[Message]:
    """The client's messages, raw, with the messages the run added (nudges, reminders, the wrap-up
    request) at the places the run added them."""
    out = list(conversation.opening)
    client = conversation.task
    i = 0
    for message in run_messages[len(conversation.opening) :]:
        while i < len(client) and client[i].get("role") not in ("assistant", "tool"):
            out.append(client[i])  # system or developer notes the client put inside the task
            i += 1
        if i < len(client) and _same_turn(message, client[i]):
            out.append(client[i])
            i += 1
        else:
            out.append(message)
    out.extend(client[i:])
    return out


def _same_turn(run_message: Message, client_message: Message) -> bool:
    if run_message.get("role") != client_message.get("role"):
        return False
    if run_message.get("role") == "tool":
        return str(run_message.get("tool_call_id")) == str(client_message.get("tool_call_id"))
    return True


def _is_function(raw: Any) -> bool:
    return isinstance(raw, dict) and isinstance(raw.get("function"), dict) and "name" in raw["function"]
