"""loopwarden's guard in PydanticAI: a capability that wraps the run's model and its toolset.

    from pydantic_ai import Agent
    from loopwarden.adapters.pydantic_ai import Loopwarden

    guard = Loopwarden(LoopConfig())
    agent = Agent(model, tools=[read_file], capabilities=[guard])
    result = await agent.run("Summarise a.txt")     # or agent.run_sync(...)
    guard.summary(result)   # {"status": ..., "stop_reason": ..., "nudges": [...], "run_id": ...}

Each agent run is one loopwarden run (one guard session, bound in `for_run`). The wrapper model
(`get_wrapper_model`) shapes each model request the way the run's guard says: the nudge it
injected (a user prompt at its place in the history), the function tools it narrowed away, the
terminal tool it forces (`tool_choice`), or no tools at all for the wrap-up answer. The wrapper
toolset (`get_wrapper_toolset`) answers a repeat from memory, gives a refused or stopped call the
guard's result instead of running it, and tells the guard what each call that ran returned. When
the guard ends the run, the model request returns the run's answer (or its stop message) as text,
so the agent ends with it as its output, and `guard.summary(result)` says why. PydanticAI's own
`UsageLimits` still apply.

Streamed runs (`run_stream`, `run_stream_events`, `iter`) are guarded too: the model streams as
usual, but the guard decides on the whole reply, so each reply reaches the consumer once complete.
With an `output_type` other than text, its output tools count as finishing tools (narrowing forces one),
and a run the guard stops raises `GuardStopped` (its stop message is text), which carries the summary.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_ai.usage import RequestUsage

from ..config import LoopConfig, check_config
from ..models.base import Usage
from ..session import GuardSession
from ..trace.tracing import TraceTarget, resolve_trace
from ._bridge import Answer, Ask, GuardStopped, Keep, RunBridge, ToolRoles, drive, reply_of

SUMMARIES_KEPT = 256


@dataclasses.dataclass(init=False)
class Loopwarden(AbstractCapability[Any]):
    """loopwarden's guard for the runs of the agents it is a capability of."""

    config: LoopConfig
    roles: ToolRoles

    def __init__(
        self,
        config: LoopConfig | None = None,
        *,
        terminal_tools: Iterable[str] = (),
        repeatable_tools: Iterable[str] = (),
        write_tools: Iterable[str] = (),
        trace: TraceTarget = None,
    ) -> None:
        self.config = config or LoopConfig()
        check_config(self.config)  # at set-up, not at the first call
        self.roles = ToolRoles(frozenset(terminal_tools), frozenset(repeatable_tools), frozenset(write_tools))
        self._trace = resolve_trace(trace)  # once: a path opens its store here, not per run
        self._summaries: OrderedDict[str, dict[str, Any]] = OrderedDict()

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a trace store and live runs: not spec-serializable

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        return _RunGuard(self, ctx.run_id)

    def summary(self, result: Any) -> dict[str, Any] | None:
        """The guard's account of the run that gave `result` (an `AgentRunResult`): run_id,
        status, stop_reason, message, detectors, nudges; None if the guard saw no model request."""
        return self._summaries.get(str(getattr(result, "run_id", "")))

    def _keep(self, run_id: str, summary: dict[str, Any]) -> None:
        self._summaries[run_id] = summary
        while len(self._summaries) > SUMMARIES_KEPT:
            self._summaries.popitem(last=False)


@dataclasses.dataclass(init=False)
class _RunGuard(AbstractCapability[Any]):
    """The capability for one run: its guard session, made at its first model request."""

    def __init__(self, guard: Loopwarden, run_id: str | None) -> None:
        self.guard, self.run_id = guard, run_id
        self.bridge: RunBridge | None = None
        self.output_tools: set[str] = set()

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def session_for(self, params: ModelRequestParameters, model_name: str) -> RunBridge:
        if self.bridge is None:
            specs = [
                self.guard.roles.spec(t.name, t.parameters_json_schema, t.description or "")
                for t in params.function_tools
            ]
            # output tools finish the run: narrowing forces one, as it would a terminal tool
            specs += [
                dataclasses.replace(
                    self.guard.roles.spec(t.name, t.parameters_json_schema, t.description or ""), terminal=True
                )
                for t in params.output_tools
            ]
            self.output_tools = {t.name for t in params.output_tools}
            session = GuardSession(
                specs, self.guard.config, model_name=model_name, run_id=self.run_id, trace=self.guard._trace
            )
            self.bridge = RunBridge(session)
        return self.bridge

    def get_wrapper_model(self, model: Model) -> Model | None:
        return _GuardedModel(model, self)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _GuardedToolset(toolset, self)

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        try:
            result = await handler()
            if self.bridge is not None:
                await self._output_ran(self.bridge, result)
            return result
        finally:
            if self.bridge is not None:
                await self.bridge.session.close()  # the framework ended first (its limit, an error)
                self.guard._keep(self.bridge.session.run_id, self.bridge.summary())

    async def _output_ran(self, bridge: RunBridge, result: Any) -> None:
        """The framework ended the run on an output tool call (it runs no toolset for it): the
        guard hears of it as of a terminal tool that ran, and finishes the run."""
        session = bridge.session
        calls = [v.call_id for v in session.verdicts.values() if v.runs and v.tool in self.output_tools]
        if not calls or session.ended:
            return
        output = getattr(result, "output", None)
        dump = getattr(output, "model_dump", None)
        for call_id in calls:
            await session.record(call_id, dump(mode="json") if callable(dump) else output)
        await session.next_turn("")  # let the run take it in: it finishes (or asks again; then closed)


@dataclasses.dataclass(init=False)
class _GuardedModel(WrapperModel):
    """The run's model with the guard around each request."""

    def __init__(self, wrapped: Model, run: _RunGuard) -> None:
        super().__init__(wrapped)
        self.run = run

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        async def call(history: list[ModelMessage], settings: ModelSettings, params: ModelRequestParameters) -> Any:
            return await self.wrapped.request(history, settings, params)

        return await self._guarded(messages, model_settings, model_request_parameters, call)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        """A streamed request: the model streams as usual, but the guard decides on the whole
        reply, so the consumer gets it (or the guard's answer) once complete, as stream events."""

        async def call(history: list[ModelMessage], settings: ModelSettings, params: ModelRequestParameters) -> Any:
            async with self.wrapped.request_stream(history, settings, params, run_context) as stream:
                async for _ in stream:
                    pass
            return stream.get()

        params = model_request_parameters
        response = await self._guarded(messages, model_settings, params, call)
        yield CompletedStreamedResponse(response, model_request_parameters=params, replay_events=True)

    async def _guarded(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        params: ModelRequestParameters,
        call: Callable[[list[ModelMessage], ModelSettings, ModelRequestParameters], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        bridge = self.run.session_for(params, self.wrapped.model_name)
        usage = RequestUsage()

        async def ask(step: Ask) -> tuple[ModelResponse, Any]:
            history = bridge.history(list(messages), _user)
            for text, requests in step.follow:
                history += [ModelResponse(parts=[TextPart(text)]), *(_user(r) for r in requests)]
            response = await call(history, *_shaped(step, model_settings, params))
            usage.incr(response.usage)
            return response, _reply(response)

        flow = bridge.model_call(_prompt(messages), len(messages))
        outcome: Keep[Any] | Answer = await drive(flow, bridge.session, ask, _no_tool)
        if isinstance(outcome, Keep):
            kept: ModelResponse = outcome.response
            return dataclasses.replace(kept, usage=usage)  # every model call it took
        if not (params.allow_text_output or not params.output_tools):
            raise GuardStopped(bridge.summary())  # structured output wanted: the stop message is text
        return ModelResponse(parts=[TextPart(outcome.text)], usage=usage, model_name=self.wrapped.model_name)


@dataclasses.dataclass
class _GuardedToolset(WrapperToolset[Any]):
    """The run's tools: each call run (and its result told to the guard) or answered by it."""

    run: _RunGuard

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        bridge, call_id = self.run.bridge, ctx.tool_call_id
        if bridge is None or call_id is None:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)

        async def run() -> Any:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)

        outcome = await drive(bridge.tool_call(call_id, returned=True), bridge.session, _no_model, run)
        return outcome.response if isinstance(outcome, Keep) else outcome.text


# -- PydanticAI's types and loopwarden's ----------------------------------------------------------


def _user(text: str) -> ModelMessage:
    return ModelRequest(parts=[UserPromptPart(text)])


def _prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    return part.content if isinstance(part.content, str) else str(part.content)
    return ""


def _shaped(
    step: Ask, settings: ModelSettings | None, params: ModelRequestParameters
) -> tuple[ModelSettings, ModelRequestParameters]:
    """The request as the run wants it: only the tools it offers, its tool choice."""
    turn = step.turn
    offered = set(turn.tools)
    tools = [t for t in params.function_tools if t.name in offered]
    visibility = params.tool_visibility
    if visibility is not None:
        visibility = {k: v for k, v in visibility.items() if k in offered}
    shaped: dict[str, Any] = dict(settings or {})
    if turn.forced_tool is not None:
        shaped["tool_choice"] = [turn.forced_tool]
    elif turn.tool_choice in ("required", "none"):
        shaped["tool_choice"] = turn.tool_choice
    elif not tools:
        shaped.pop("tool_choice", None)
    return cast(ModelSettings, shaped), dataclasses.replace(params, function_tools=tools, tool_visibility=visibility)


def _reply(response: ModelResponse) -> Any:
    calls: list[tuple[str | None, str, Any]] = [
        (p.tool_call_id, p.tool_name, p.args if p.args is not None else {})
        for p in response.parts
        if isinstance(p, ToolCallPart)
    ]
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    usage = Usage(prompt_tokens=response.usage.input_tokens, completion_tokens=response.usage.output_tokens)
    return reply_of(text, calls, usage)


async def _no_tool() -> Any:
    raise AssertionError("a model request runs no tool")


async def _no_model(step: Ask) -> Any:
    raise AssertionError("a tool call calls no model")
