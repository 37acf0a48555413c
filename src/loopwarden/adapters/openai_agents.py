"""loopwarden's guard in the OpenAI Agents SDK: a wrapping `Model` and tool guardrails.

    from agents import Agent, Runner
    from loopwarden.adapters.openai_agents import LoopwardenGuard

    guard = LoopwardenGuard(LoopConfig())
    agent = guard.wrap(Agent(name="analyst", model=model, tools=[read_file]))
    result = await Runner.run(agent, "Summarise a.txt")
    guard.summary(result)   # {"status": ..., "stop_reason": ..., "nudges": [...], "run_id": ...}

`wrap` returns a clone of the agent whose model is a `LoopwardenModel` around its own and whose
function tools carry two tool guardrails. Each `Runner.run` is one loopwarden run (one guard
session). Around each model call the run's guard shapes the request: the nudge it injected, the
tools it narrowed away, the terminal tool it forces (`tool_choice`), or no tools at all for the
wrap-up answer. The input guardrail answers a repeat from memory and gives a refused or stopped
call the guard's result instead of running it (`reject_content`); the output guardrail tells the
guard what a call that ran returned. When the guard ends the run, the model call returns the run's
answer (or its stop message) as a plain assistant message, so the SDK ends the run with it as the
final output, and `guard.summary(result)` says why. The SDK's own `max_turns` still applies.

`Runner.run_streamed` is guarded too: the model streams as usual, but the guard decides on the whole
reply, so each reply reaches the run's stream once complete. Not covered: server-side conversation
state (`previous_response_id`, `conversation_id`: the guard needs the whole input) and handoff targets
that are not wrapped (wrap each agent that should be guarded; each wrapped agent a run reaches gets its
own guard session). With an `output_type` other than text, a run the guard stops
raises `GuardStopped` (its stop message is text), which carries the summary.
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from agents import Agent, FunctionTool, ModelResponse, RunResult, RunResultStreaming, Usage
from agents.items import TResponseInputItem
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.models.interface import Model, ModelTracing
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ..config import LoopConfig, check_config
from ..models.base import Usage as LoopUsage
from ..session import GuardSession, ToolSpec
from ..trace.tracing import TraceTarget, resolve_trace
from ._bridge import Answer, Ask, Bridges, GuardStopped, Keep, RunBridge, ToolRoles, as_returned, drive, reply_of

try:  # the run a model call belongs to: the SDK's own per-run owner (its hosted models use it too)
    from agents.models._run_context import get_model_run_owner
except ImportError as error:  # pragma: no cover - an SDK too old for the adapter
    raise ImportError("loopwarden.adapters.openai_agents needs openai-agents >= 0.24") from error

GUARDRAIL = "loopwarden"
CALLS_KEPT = 8192


class LoopwardenGuard:
    """loopwarden's guard for the runs of the agents it wraps."""

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
        self.trace = resolve_trace(trace)  # once: a path opens its store here, not per run
        self._bridges = Bridges()
        self._runs: weakref.WeakKeyDictionary[object, dict[int, RunBridge]] = weakref.WeakKeyDictionary()
        """The guard session of each agent (its wrapped model, by id) in each run (the SDK's owner)."""
        self._calls: OrderedDict[str, RunBridge] = OrderedDict()
        self._responses: OrderedDict[int, tuple[ModelResponse, RunBridge]] = OrderedDict()

    def wrap(self, agent: Agent[Any]) -> Agent[Any]:
        """A clone of `agent` run under the guard: its model wrapped, its function tools guarded."""
        if not isinstance(agent, Agent):
            raise TypeError(f"LoopwardenGuard.wrap() takes an agents.Agent, not {type(agent).__name__}")
        model = agent.model if isinstance(agent.model, Model) else None
        name = agent.model if isinstance(agent.model, str) else None
        tools = [self._guarded_tool(t) if isinstance(t, FunctionTool) else t for t in agent.tools]
        return agent.clone(model=LoopwardenModel(self, model, name), tools=tools)

    def summary(self, result: RunResult | RunResultStreaming) -> dict[str, Any] | None:
        """The guard's account of the run that gave `result`: run_id, status, stop_reason,
        message, detectors, nudges; None if the guard saw none of its model calls."""
        for response in reversed(result.raw_responses):
            kept = self._responses.get(id(response))
            if kept is not None and kept[0] is response:
                return kept[1].summary()
            for item in response.output:  # a streamed run's responses are the SDK's: by their calls
                if isinstance(item, ResponseFunctionToolCall) and item.call_id in self._calls:
                    return self._calls[item.call_id].summary()
        return None

    # -- the tools -----------------------------------------------------------------------------------

    def _guarded_tool(self, tool: FunctionTool) -> FunctionTool:
        before = ToolInputGuardrail[Any](guardrail_function=self._before_tool, name=GUARDRAIL)
        after = ToolOutputGuardrail[Any](guardrail_function=self._after_tool, name=GUARDRAIL)
        return dataclasses.replace(
            tool,
            tool_input_guardrails=[before, *(tool.tool_input_guardrails or [])],
            tool_output_guardrails=[after, *(tool.tool_output_guardrails or [])],
        )

    async def _before_tool(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        """Run the call, or answer it with what the guard decided (a repeat, a refusal, a stop)."""
        call_id = data.context.tool_call_id
        bridge = self._calls.get(call_id)
        verdict = bridge.verdict(call_id) if bridge is not None else None
        if bridge is None or verdict is None or verdict.runs:
            return ToolGuardrailFunctionOutput.allow()
        content = await bridge.session.answer(call_id)
        return ToolGuardrailFunctionOutput.reject_content(content, output_info={"loopwarden": verdict.action})

    async def _after_tool(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        """Tell the guard what a call that ran returned: the tool's own value (the SDK's error
        text, if it failed and the tool has the default failure_error_function)."""
        call_id = data.context.tool_call_id
        bridge = self._calls.get(call_id)
        verdict = bridge.verdict(call_id) if bridge is not None else None
        if bridge is not None and verdict is not None and verdict.runs:
            await bridge.session.record(call_id, as_returned(data.output))
        return ToolGuardrailFunctionOutput.allow()

    # -- the runs ------------------------------------------------------------------------------------

    def _bridge(self, model: LoopwardenModel, tools: list[Any], handoffs: list[Any], model_name: str) -> RunBridge:
        """The guard session of this agent in this run: one per wrapped agent a run reaches (a
        handoff hands over to the next agent's own session)."""
        owner = get_model_run_owner()
        agents = self._runs.setdefault(owner, {}) if owner is not None else {}
        bridge = agents.get(id(model))
        if bridge is None:
            specs = [
                self.roles.spec(t.name, t.params_json_schema, t.description or "")
                for t in tools
                if isinstance(t, FunctionTool)
            ]
            specs += [ToolSpec(h.tool_name, h.input_json_schema or None, h.tool_description) for h in handoffs]
            session = GuardSession(specs, self.config, model_name=model_name, trace=self.trace)
            bridge = self._bridges.add(RunBridge(session))
            agents[id(model)] = bridge
        return bridge

    def _note(self, bridge: RunBridge, response: ModelResponse) -> None:
        """Remember which run proposed each call, and gave each response (`summary`)."""
        for item in response.output:
            if isinstance(item, ResponseFunctionToolCall):
                self._calls[item.call_id] = bridge
                self._calls.move_to_end(item.call_id)
        self._responses[id(response)] = (response, bridge)  # held, so its id is not reused meanwhile
        for kept in (self._calls, self._responses):
            while len(kept) > CALLS_KEPT:
                kept.popitem(last=False)


class LoopwardenModel(Model):
    """The agent's model with the guard around each call (made by `LoopwardenGuard.wrap`)."""

    def __init__(self, guard: LoopwardenGuard, model: Model | None, name: str | None = None) -> None:
        self.guard, self._model, self._name = guard, model, name

    @property
    def model(self) -> Model:
        if self._model is None:  # a model name: the SDK's default provider resolves it
            from agents.models.multi_provider import MultiProvider

            self._model = MultiProvider().get_model(self._name)
        return self._model

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        request = _Request(system_instructions, input, model_settings, tools, output_schema, handoffs, tracing)
        ids = {"previous_response_id": previous_response_id, "conversation_id": conversation_id, "prompt": prompt}

        async def call(*args: Any) -> ModelResponse:
            return await self.model.get_response(*args, **ids)

        response, _ = await self._guarded(request, call)
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[Any]:
        """A streamed call: the model streams as usual, but the guard decides on the whole reply,
        so the run's stream gets the model's events (or the guard's answer) once it is complete."""
        request = _Request(system_instructions, input, model_settings, tools, output_schema, handoffs, tracing)
        ids = {"previous_response_id": previous_response_id, "conversation_id": conversation_id, "prompt": prompt}
        events: list[Any] = []

        async def call(*args: Any) -> ModelResponse:
            events.clear()
            done: Response | None = None
            async for event in self.model.stream_response(*args, **ids):
                events.append(event)
                if isinstance(event, ResponseCompletedEvent):
                    done = event.response
            if done is None:
                raise RuntimeError("the model's stream ended without a response.completed event")
            return ModelResponse(output=list(done.output), usage=_usage(done.usage), response_id=done.id)

        response, kept = await self._guarded(request, call)
        if kept:
            for event in events:  # the model's own stream of the reply that stands
                yield event
            return
        done = Response(
            id=FAKE_RESPONSES_ID,
            created_at=time.time(),
            model=self._name or "loopwarden",
            object="response",
            output=list(response.output),
            parallel_tool_calls=False,
            tool_choice="none",
            tools=[],
        )
        yield ResponseCompletedEvent(type="response.completed", response=done, sequence_number=0)

    async def _guarded(
        self, request: _Request, call: Callable[..., Awaitable[ModelResponse]]
    ) -> tuple[ModelResponse, bool]:
        """One model call of the SDK under the guard: (the response, whether it is the model's own)."""
        model, tools, handoffs = self.model, request.tools, request.handoffs
        bridge = self.guard._bridge(self, tools, handoffs, self._name or type(model).__name__)
        items: list[Any] = [_user(request.input)] if isinstance(request.input, str) else list(request.input)
        usage = Usage()

        async def ask(step: Ask) -> tuple[ModelResponse, Any]:
            offered = set(step.turn.tools)
            shaped = [t for t in tools if not isinstance(t, FunctionTool) or t.name in offered]
            if not offered:
                shaped = []
            messages = bridge.history(items, _user)
            for text, requests in step.follow:
                messages += [{"role": "assistant", "content": text}, *(_user(r) for r in requests)]
            settings = request.model_settings
            response = await call(
                request.system_instructions,
                messages,
                dataclasses.replace(settings, tool_choice=_tool_choice(step, settings.tool_choice)),
                shaped,
                request.output_schema,
                [h for h in handoffs if h.tool_name in offered],
                request.tracing,
            )
            usage.add(response.usage)
            return response, _reply(response)

        flow = bridge.model_call(_prompt(items), len(items))
        outcome: Keep[Any] | Answer = await drive(flow, bridge.session, ask, _no_tool)
        if isinstance(outcome, Keep):
            response: ModelResponse = outcome.response
            response = dataclasses.replace(response, usage=usage)  # every model call it took
        elif request.output_schema is not None and not request.output_schema.is_plain_text():
            raise GuardStopped(bridge.summary())  # structured output wanted: the stop message is text
        else:
            response = ModelResponse(output=[_message(outcome.text)], usage=usage, response_id=None)
        self.guard._note(bridge, response)
        return response, isinstance(outcome, Keep)

    def get_retry_advice(self, request: Any) -> Any:
        return self.model.get_retry_advice(request)  # the SDK retries a failed call: the guard's turn waits

    async def _cleanup_on_run_end(self, owner: object) -> None:
        """The SDK's call when a run ends, however it ended (an answer, `max_turns`, an error):
        the run's guard session ends with it."""
        bridge = self.guard._runs.get(owner, {}).pop(id(self), None)
        if bridge is not None:
            await bridge.session.close()
        if self._model is not None:
            await self._model._cleanup_on_run_end(owner)

    async def close(self) -> None:
        if self._model is not None:
            await self._model.close()


# -- the SDK's types and loopwarden's --------------------------------------------------------------


def _user(text: str) -> Any:
    return {"role": "user", "content": text}


def _prompt(items: list[Any]) -> str:
    for item in items:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _tool_choice(step: Ask, current: Any) -> Any:
    turn = step.turn
    if turn.forced_tool is not None:
        return turn.forced_tool
    if turn.tool_choice in ("required", "none"):
        return turn.tool_choice
    return None if not turn.tools else current


def _reply(response: ModelResponse) -> Any:
    calls: list[tuple[str | None, str, Any]] = [
        (item.call_id, item.name, item.arguments or "{}")
        for item in response.output
        if isinstance(item, ResponseFunctionToolCall)
    ]
    text = "".join(
        part.text
        for item in response.output
        if isinstance(item, ResponseOutputMessage)
        for part in item.content
        if isinstance(part, ResponseOutputText)
    )
    usage = LoopUsage(prompt_tokens=response.usage.input_tokens, completion_tokens=response.usage.output_tokens)
    return reply_of(text, calls, usage)


@dataclasses.dataclass
class _Request:
    """A model call's arguments, as the SDK gave them (the ids aside)."""

    system_instructions: str | None
    input: str | list[TResponseInputItem]
    model_settings: Any
    tools: list[Any]
    output_schema: Any
    handoffs: list[Any]
    tracing: ModelTracing


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(
        requests=1, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, total_tokens=usage.total_tokens
    )


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=FAKE_RESPONSES_ID,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
    )


async def _no_tool() -> Any:
    raise AssertionError("a model call runs no tool")
