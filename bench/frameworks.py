"""The same scripted model and tools plugged into each framework through that framework's own
test-model mechanism, with its default limits (unless `limit` raises them, for the overhead
benchmark). Every runner returns the meter (model calls, tokens), the world (what ran) and how
the run ended."""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from scenarios import MEASUREMENT_CAP, TOOL_NAMES, Answer, Call, CapReached, Meter, Scenario, World, chars


@dataclass
class Outcome:
    framework: str
    meter: Meter
    world: World
    ended: str
    """How the run ended: the framework's own stop (an exception name or stop reason)."""


Runner = Callable[[Scenario, "int | None"], Awaitable[Outcome]]


def _tool_functions(world: World, names: tuple[str, ...]) -> list[Callable[..., str]]:
    """Typed, documented functions bound to this run's world (every framework reads the
    signature and docstring to build the tool schema)."""

    def read_file(path: str) -> str:
        """Read a text file.

        Args:
            path: the file name
        """
        return world.read_file(path)

    def search(query: str) -> str:
        """Search the document index.

        Args:
            query: what to look for
        """
        return world.search(query)

    def open_document(doc_id: str) -> str:
        """Open a document found by search.

        Args:
            doc_id: the document id
        """
        return world.open_document(doc_id)

    def run_command(command: str) -> str:
        """Run a shell command in the repository.

        Args:
            command: the command line
        """
        return world.run_command(command)

    table = {f.__name__: f for f in (read_file, search, open_document, run_command)}
    assert set(table) == set(TOOL_NAMES)
    return [table[n] for n in names]


READABLE = ("role", "type", "content", "name", "arguments", "output", "args", "tool_calls", "function")


def _readable(message: dict[str, Any]) -> dict[str, Any]:
    """What of a message reaches a model as text: roles, content, tool names and arguments (ids,
    statuses and timestamps left out), so the token meter is the same for every framework."""
    kept = {k: v for k, v in message.items() if k in READABLE and v is not None}
    if isinstance(kept.get("tool_calls"), list):
        kept["tool_calls"] = [_readable(c) for c in kept["tool_calls"] if isinstance(c, dict)]
    if isinstance(kept.get("function"), dict):
        kept["function"] = _readable(kept["function"])
    return kept


def langchain_payload(messages: list[Any]) -> list[dict[str, Any]]:
    """What of LangChain messages a model reads (see _readable)."""
    return [
        _readable({"role": m.type, "content": m.content, "tool_calls": getattr(m, "tool_calls", None)})
        for m in messages
    ]


# -- loopwarden --------------------------------------------------------------------------------


async def run_loopwarden(scenario: Scenario, limit: int | None = None) -> Outcome:
    from loopwarden import Agent, Budgets, FunctionModel, LoopConfig, ModelRequest, ToolCall, tool

    meter, world = Meter(scenario), World()

    def model(request: ModelRequest) -> Any:
        # Steering shows as user messages after the first (read only when metered: it scans the history).
        steered = scenario.metered and sum(1 for m in request.messages if m.get("role") == "user") > 1
        asked_to_answer = not request.tools and request.messages[-1].get("role") == "user"
        # With tools merely narrowed away, a collapsed model goes on calling them (the strict case).
        decision = meter.decide(
            prompt_chars=lambda: chars([_readable(m) for m in request.messages]),
            tools_offered=not asked_to_answer,
            steered=steered,
        )
        if isinstance(decision, Answer):
            return decision.text
        return ToolCall(id=f"c{meter.calls}", name=decision.tool, arguments=json.dumps(decision.args))

    config = (
        LoopConfig() if limit is None else LoopConfig(budgets=Budgets(max_tool_rounds=limit, max_model_calls=limit))
    )
    tools = [tool(f) for f in _tool_functions(world, scenario.tools)]
    # The peers' stand-in models keep no log of requests; loopwarden's does unless told not to.
    scripted = FunctionModel(model, name="scripted", keep_requests=False)
    run = await Agent(scripted, tools, config=config).run(scenario.prompt)
    return Outcome("loopwarden", meter, world, run.stop_reason)


# -- LangGraph ---------------------------------------------------------------------------------


async def run_langgraph(scenario: Scenario, limit: int | None = None) -> Outcome:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool
    from langgraph.errors import GraphRecursionError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    meter, world = Meter(scenario), World()

    class ScriptedChat(BaseChatModel):
        """LangChain's documented way to stand in a model: a BaseChatModel subclass."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            decision = meter.decide(prompt_chars=lambda: chars(langchain_payload(messages)), tools_offered=True)
            if isinstance(decision, Answer):
                message = AIMessage(content=decision.text)
            else:
                call = {"name": decision.tool, "args": decision.args, "id": f"c{meter.calls}", "type": "tool_call"}
                message = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=message)])

    tools = [StructuredTool.from_function(f) for f in _tool_functions(world, scenario.tools)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(ScriptedChat(), tools)
    config = {} if limit is None else {"recursion_limit": 2 * limit + 5}
    try:
        await graph.ainvoke({"messages": [("user", scenario.prompt)]}, config=config)  # type: ignore[arg-type]
        ended = "final answer"
    except GraphRecursionError:
        ended = "GraphRecursionError"
    except CapReached:
        ended = f"not stopped by {MEASUREMENT_CAP} calls (default recursion_limit {_langgraph_default_limit()})"
    return Outcome("LangGraph", meter, world, ended)


def _langgraph_default_limit() -> str:
    try:
        from langgraph._internal._config import DEFAULT_RECURSION_LIMIT

        return str(int(DEFAULT_RECURSION_LIMIT))
    except ImportError:
        return "?"


# -- OpenAI Agents SDK -------------------------------------------------------------------------


async def run_openai_agents(scenario: Scenario, limit: int | None = None) -> Outcome:
    from agents import Agent, MaxTurnsExceeded, ModelResponse, Runner, function_tool, set_tracing_disabled
    from agents.models.interface import Model

    set_tracing_disabled(True)
    meter, world = Meter(scenario), World()

    class ScriptedModel(Model):
        """The SDK's Model interface, as its own tests' FakeModel implements it."""

        async def get_response(
            self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *a: Any, **kw: Any
        ) -> ModelResponse:
            def payload() -> list[Any]:
                items = [input] if isinstance(input, str) else [_readable(dict(i)) for i in input]
                return [system_instructions, items]

            decision = meter.decide(prompt_chars=lambda: chars(payload()), tools_offered=bool(tools))
            return agents_response(decision, f"c{meter.calls}")

        def stream_response(self, *a: Any, **kw: Any) -> Any:
            raise NotImplementedError

    tools = [function_tool(f) for f in _tool_functions(world, scenario.tools)]
    agent = Agent(name="bench", model=ScriptedModel(), tools=tools)
    try:
        if limit is None:
            await Runner.run(agent, scenario.prompt)
        else:
            await Runner.run(agent, scenario.prompt, max_turns=limit + 2)
        ended = "final answer"
    except MaxTurnsExceeded:
        ended = "MaxTurnsExceeded (max_turns 10)"
    return Outcome("OpenAI Agents SDK", meter, world, ended)


def agents_response(decision: Answer | Call, call_id: str) -> Any:
    """The scripted model's decision as an Agents SDK `ModelResponse`."""
    from agents import ModelResponse, Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    if isinstance(decision, Answer):
        text = ResponseOutputText(text=decision.text, type="output_text", annotations=[])
        output: list[Any] = [
            ResponseOutputMessage(id="m", content=[text], role="assistant", status="completed", type="message")
        ]
    else:
        arguments = json.dumps(decision.args)
        output = [
            ResponseFunctionToolCall(
                id=call_id, call_id=call_id, name=decision.tool, arguments=arguments, type="function_call"
            )
        ]
    return ModelResponse(output=output, usage=Usage(), response_id=None)


# -- PydanticAI --------------------------------------------------------------------------------


async def run_pydantic_ai(scenario: Scenario, limit: int | None = None) -> Outcome:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    meter, world = Meter(scenario), World()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # What reaches a real model: kinds, text, tool names and arguments (not timestamps or ids).
        def payload() -> list[Any]:
            return [
                [{k: getattr(p, k, None) for k in ("part_kind", "content", "tool_name", "args")} for p in m.parts]
                for m in messages
            ]

        decision = meter.decide(prompt_chars=lambda: chars(payload()), tools_offered=bool(info.function_tools))
        if isinstance(decision, Answer):
            return ModelResponse(parts=[TextPart(decision.text)])
        return ModelResponse(parts=[ToolCallPart(decision.tool, decision.args, tool_call_id=f"c{meter.calls}")])

    agent = Agent(FunctionModel(model), tools=_tool_functions(world, scenario.tools))
    try:
        if limit is None:
            await agent.run(scenario.prompt)
        else:
            await agent.run(scenario.prompt, usage_limits=UsageLimits(request_limit=limit + 2))
        ended = "final answer"
    except UsageLimitExceeded:
        ended = "UsageLimitExceeded (request_limit 50)"
    return Outcome("PydanticAI", meter, world, ended)


# -- smolagents --------------------------------------------------------------------------------


async def run_smolagents(scenario: Scenario, limit: int | None = None) -> Outcome:
    import asyncio

    return await asyncio.to_thread(_run_smolagents_sync, scenario, limit)


def _run_smolagents_sync(scenario: Scenario, limit: int | None) -> Outcome:
    from smolagents import ToolCallingAgent, tool
    from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model

    meter, world = Meter(scenario), World()

    class ScriptedModel(Model):
        """smolagents' Model base class with `generate` overridden, as its tests do."""

        def generate(
            self,
            messages: list[ChatMessage],
            stop_sequences: Any = None,
            response_format: Any = None,
            tools_to_call_from: Any = None,
            **kw: Any,
        ) -> ChatMessage:
            def payload() -> list[dict[str, Any]]:
                return [{"role": str(m.role), "content": m.content} for m in messages]

            decision = meter.decide(prompt_chars=lambda: chars(payload()), tools_offered=bool(tools_to_call_from))
            if isinstance(decision, Answer):
                name, args = "final_answer", {"answer": decision.text}
                if not tools_to_call_from:  # provide_final_answer asks for plain text
                    return ChatMessage(role=MessageRole.ASSISTANT, content=decision.text)
            else:
                name, args = decision.tool, decision.args
            call = ChatMessageToolCall(
                id=f"c{meter.calls}-{uuid.uuid4().hex[:6]}",
                type="function",
                function=ChatMessageToolCallFunction(name=name, arguments=args),
            )
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])

    tools = [tool(f) for f in _tool_functions(world, scenario.tools)]
    kwargs: dict[str, Any] = {} if limit is None else {"max_steps": limit + 2}
    agent = ToolCallingAgent(tools=tools, model=ScriptedModel(model_id="scripted"), verbosity_level=-1, **kwargs)
    agent.run(scenario.prompt)
    ended = "max_steps (20), then a final-answer call" if agent.step_number > agent.max_steps else "final answer"
    return Outcome("smolagents", meter, world, ended)


RUNNERS: dict[str, Runner] = {
    "loopwarden": run_loopwarden,
    "LangGraph": run_langgraph,
    "OpenAI Agents SDK": run_openai_agents,
    "PydanticAI": run_pydantic_ai,
    "smolagents": run_smolagents,
}
