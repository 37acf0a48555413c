"""loopwarden's guard as a LangChain v1 `create_agent` middleware (the agent runs on LangGraph).

    from langchain.agents import create_agent
    from loopwarden.adapters.langchain import LoopwardenMiddleware

    agent = create_agent(model, tools, middleware=[LoopwardenMiddleware(LoopConfig())])
    state = agent.invoke({"messages": [("user", "Summarise a.txt and b.txt")]})
    state["loopwarden"]   # {"status": ..., "stop_reason": ..., "nudges": [...], "run_id": ...}

Around each model call (`wrap_model_call`) the run's guard shapes the request: the nudge it
injected, the tools it narrowed away, the terminal tool it forces, or no tools at all for the
wrap-up answer. Around each tool call (`wrap_tool_call`) a repeat is answered from memory and a
refused or stopped call gets the guard's result instead of running. When the guard ends the run,
the model call returns the run's answer (or its stop message) with no tool calls, so the agent
ends, and `state["loopwarden"]` says why. Works with `invoke` and `ainvoke`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..config import LoopConfig, check_config
from ..models.base import Usage
from ..session import GuardSession, ToolSpec
from ..trace.tracing import TraceTarget, resolve_trace
from ._bridge import Answer, Ask, Bridges, Keep, RunBridge, ToolRoles, drive, drive_sync, reply_of

KEY = "loopwarden"


class LoopwardenState(AgentState):
    loopwarden: NotRequired[dict[str, Any]]
    """The guard's account of the run: run_id, status, stop_reason, message, detectors, nudges."""


class LoopwardenMiddleware(AgentMiddleware[LoopwardenState, Any]):
    """The guard of a loopwarden run, inside a `create_agent` agent."""

    state_schema = LoopwardenState

    def __init__(
        self,
        config: LoopConfig | None = None,
        *,
        terminal_tools: frozenset[str] = frozenset(),
        repeatable_tools: frozenset[str] = frozenset(),
        write_tools: frozenset[str] = frozenset(),
        trace: TraceTarget = None,
    ) -> None:
        super().__init__()
        self.config = config or LoopConfig()
        check_config(self.config)  # at set-up, not at the first call
        self.terminal_tools, self.repeatable_tools, self.write_tools = terminal_tools, repeatable_tools, write_tools
        self.trace = resolve_trace(trace)  # once: a path opens its store here, not per run
        self._bridges = Bridges()

    # -- the run -----------------------------------------------------------------------------------

    def before_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        return {KEY: {"run_id": uuid.uuid4().hex, "status": "running"}}

    async def abefore_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def after_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        bridge = self._bridges.pop(_run_id(state))
        if bridge is None:
            return None
        bridge.session.close_sync()
        return {KEY: bridge.summary()}

    async def aafter_agent(self, state: LoopwardenState, runtime: Any) -> dict[str, Any] | None:
        bridge = self._bridges.pop(_run_id(state))
        if bridge is None:
            return None
        await bridge.session.close()
        return {KEY: bridge.summary()}

    # -- the model call ----------------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | AIMessage:
        bridge = self._bridge(request)
        if bridge is None:
            return handler(request)

        def ask(step: Ask) -> tuple[ModelResponse, Any]:
            response = handler(_shaped(request, step, bridge))
            return response, _reply(response)

        flow = bridge.model_call(_prompt(request.messages), len(request.messages))
        return _outcome(drive_sync(flow, bridge.session, ask, _no_tool))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | AIMessage:
        bridge = self._bridge(request)
        if bridge is None:
            return await handler(request)

        async def ask(step: Ask) -> tuple[ModelResponse, Any]:
            response = await handler(_shaped(request, step, bridge))
            return response, _reply(response)

        flow = bridge.model_call(_prompt(request.messages), len(request.messages))
        return _outcome(await drive(flow, bridge.session, ask, _no_tool_async))

    # -- the tool call -----------------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        bridge = self._bridges.get(_run_id(request.state))
        call_id = str(request.tool_call.get("id"))
        if bridge is None:
            return handler(request)
        result = drive_sync(bridge.tool_call(call_id), bridge.session, _no_model, lambda: _ran(handler(request)))
        return _tool_outcome(result, request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        bridge = self._bridges.get(_run_id(request.state))
        call_id = str(request.tool_call.get("id"))
        if bridge is None:
            return await handler(request)

        async def run() -> Any:
            return _ran(await handler(request))

        result = await drive(bridge.tool_call(call_id), bridge.session, _no_model_async, run)
        return _tool_outcome(result, request)

    def _bridge(self, request: ModelRequest) -> RunBridge | None:
        run_id = _run_id(request.state)
        if run_id is None:
            return None
        bridge = self._bridges.get(run_id)
        if bridge is None:
            specs = [self._spec(t) for t in request.tools]
            session = GuardSession(specs, self.config, model_name=_model_name(request), run_id=run_id, trace=self.trace)
            bridge = self._bridges.add(RunBridge(session))
        return bridge

    def _spec(self, tool: Any) -> ToolSpec:
        function = convert_to_openai_tool(tool)["function"]
        roles = ToolRoles(self.terminal_tools, self.repeatable_tools, self.write_tools)
        return roles.spec(function["name"], function.get("parameters"), function.get("description") or "")


# -- LangChain's types and loopwarden's ------------------------------------------------------------


def _run_id(state: Any) -> str | None:
    info = state.get(KEY) if isinstance(state, dict) else getattr(state, KEY, None)
    return info.get("run_id") if isinstance(info, dict) else None


def _model_name(request: ModelRequest) -> str:
    model = request.model
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)


def _prompt(messages: list[AnyMessage]) -> str:
    first = next((m for m in messages if isinstance(m, HumanMessage)), None)
    return first.text if first is not None else ""


def _shaped(request: ModelRequest, step: Ask, bridge: RunBridge) -> ModelRequest:
    """The framework's request as the run wants it: its tools, its tool choice, its messages."""
    turn = step.turn
    offered = set(turn.tools)
    tools = [t for t in request.tools if convert_to_openai_tool(t)["function"]["name"] in offered]
    choice: Any = request.tool_choice
    if turn.forced_tool is not None:
        choice = turn.forced_tool
    elif turn.tool_choice == "required":
        choice = "any"
    elif turn.tool_choice == "none":
        choice = "none"
    elif not tools:
        choice = None
    messages: list[AnyMessage] = bridge.history(list(request.messages), HumanMessage)
    for text, requests in step.follow:
        messages += [AIMessage(content=text), *(HumanMessage(content=r) for r in requests)]
    return request.override(tools=tools, tool_choice=choice, messages=messages)


def _reply(response: ModelResponse) -> Any:
    message = next((m for m in response.result if isinstance(m, AIMessage)), None)
    if message is None:
        return reply_of(None, [])
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    return reply_of(
        message.text,
        [(c.get("id"), c["name"], c.get("args") or {}) for c in message.tool_calls],
        Usage(prompt_tokens=usage.get("input_tokens", 0), completion_tokens=usage.get("output_tokens", 0)),
    )


def _outcome(result: Keep[Any] | Answer) -> ModelResponse | AIMessage:
    if isinstance(result, Keep):
        return result.response  # type: ignore[no-any-return]
    return AIMessage(content=result.text)


def _ran(result: ToolMessage | Command[Any]) -> Any:
    """What the session records of a tool call the framework ran: the text the model reads."""
    return result if not isinstance(result, ToolMessage) else _Ran(result)


class _Ran(str):
    """A ToolMessage's text that still carries the message (the framework gets it back as it was)."""

    message: ToolMessage

    def __new__(cls, message: ToolMessage) -> _Ran:
        text = message.content if isinstance(message.content, str) else message.text
        made = super().__new__(cls, text)
        made.message = message
        return made


def _tool_outcome(result: Keep[Any] | Answer, request: ToolCallRequest) -> ToolMessage | Command[Any]:
    if isinstance(result, Keep):
        value = result.response
        return value.message if isinstance(value, _Ran) else value
    call = request.tool_call
    return ToolMessage(
        content=result.text,
        tool_call_id=str(call.get("id")),
        name=call.get("name"),
        status="error" if result.error else "success",
    )


def _no_tool() -> Any:
    raise AssertionError("a model call runs no tool")


async def _no_tool_async() -> Any:
    raise AssertionError("a model call runs no tool")


def _no_model(step: Ask) -> Any:
    raise AssertionError("a tool call calls no model")


async def _no_model_async(step: Ask) -> Any:
    raise AssertionError("a tool call calls no model")
