"""The collapse scenarios through each framework twice: at its defaults and with loopwarden's
adapter (loopwarden.adapters), the same scripted model in both. The model behaves as in
loopwarden's own run (frameworks.run_loopwarden): steered means a user message after the task
began (only the guard adds one), asked to answer means no tools offered after a user message.

    python bench/adapters.py [framework ...]   # the table and the per-step overhead
    python bench/adapters.py --readme          # ... written into README.md
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from frameworks import Outcome, _readable, _tool_functions, agents_response, langchain_payload, run_loopwarden
from readme_blocks import write_blocks
from run import versions
from scenarios import MEASUREMENT_CAP, SCENARIOS, Answer, Call, CapReached, Decision, Meter, Scenario, World, chars

from loopwarden import Budgets, LoopConfig

STEPS = 30
REPEATS = 7

Runner = Callable[[Scenario, "int | None", bool], Awaitable[Outcome]]


def _config(limit: int | None) -> LoopConfig:
    if limit is None:
        return LoopConfig()
    return LoopConfig(budgets=Budgets(max_tool_rounds=limit, max_model_calls=limit))


def _ended(summary: dict[str, Any] | None, default: str) -> str:
    """How a guarded run ended: the guard's stop reason, or the framework's own ending."""
    if summary and summary.get("stop_reason"):
        return str(summary["stop_reason"])
    return default


# -- LangChain v1 create_agent -------------------------------------------------------------------


async def run_langchain(scenario: Scenario, limit: int | None = None, guarded: bool = False) -> Outcome:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool
    from langgraph.errors import GraphRecursionError

    from loopwarden.adapters.langchain import LoopwardenMiddleware

    meter, world = Meter(scenario), World()

    class ScriptedChat(BaseChatModel):
        """LangChain's documented way to stand in a model; `bind_tools` keeps what was offered."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(offered=len(tools))

        def _generate(
            self,
            messages: list[BaseMessage],
            stop: Any = None,
            run_manager: Any = None,
            offered: int = 0,
            **kw: Any,
        ) -> ChatResult:
            steered = scenario.metered and sum(isinstance(m, HumanMessage) for m in messages) > 1
            asked_to_answer = not offered and isinstance(messages[-1], HumanMessage)
            decision = meter.decide(
                prompt_chars=lambda: chars(langchain_payload(messages)),
                tools_offered=not asked_to_answer,
                steered=steered,
            )
            if isinstance(decision, Answer):
                message = AIMessage(content=decision.text)
            else:
                call = {"name": decision.tool, "args": decision.args, "id": f"c{meter.calls}", "type": "tool_call"}
                message = AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=message)])

    tools = [StructuredTool.from_function(f) for f in _tool_functions(world, scenario.tools)]
    middleware = [LoopwardenMiddleware(_config(limit))] if guarded else []
    agent = create_agent(ScriptedChat(), tools, middleware=middleware)
    config = {} if limit is None else {"recursion_limit": 2 * limit + 10}
    summary = None
    try:
        state = await agent.ainvoke({"messages": [("user", scenario.prompt)]}, config=config)  # type: ignore[arg-type]
        summary, ended = state.get("loopwarden"), "final answer"
    except GraphRecursionError:
        ended = "GraphRecursionError"
    except CapReached:
        ended = f"not stopped by {MEASUREMENT_CAP} calls"
    name = "LangChain create_agent" + (" + loopwarden" if guarded else "")
    return Outcome(name, meter, world, _ended(summary, ended))


# -- OpenAI Agents SDK ---------------------------------------------------------------------------


async def run_openai_agents(scenario: Scenario, limit: int | None = None, guarded: bool = False) -> Outcome:
    from agents import Agent, MaxTurnsExceeded, ModelResponse, Runner, function_tool, set_tracing_disabled
    from agents.models.interface import Model

    from loopwarden.adapters.openai_agents import LoopwardenGuard

    set_tracing_disabled(True)
    meter, world = Meter(scenario), World()

    def role(item: Any) -> Any:
        return item.get("role") if isinstance(item, dict) else None

    class ScriptedModel(Model):
        """The SDK's Model interface, as its own tests' FakeModel implements it."""

        async def get_response(
            self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *a: Any, **kw: Any
        ) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
            steered = scenario.metered and sum(role(i) == "user" for i in items) > 1
            asked_to_answer = not tools and role(items[-1]) == "user"
            decision = meter.decide(
                prompt_chars=lambda: chars([system_instructions, [_readable(dict(i)) for i in items]]),
                tools_offered=not asked_to_answer,
                steered=steered,
            )
            return agents_response(decision, f"c{meter.calls}")

        def stream_response(self, *a: Any, **kw: Any) -> Any:
            raise NotImplementedError

    tools = [function_tool(f) for f in _tool_functions(world, scenario.tools)]
    agent = Agent(name="bench", model=ScriptedModel(), tools=tools)
    guard = LoopwardenGuard(_config(limit)) if guarded else None
    summary = None
    try:
        kwargs: dict[str, Any] = {} if limit is None else {"max_turns": limit + 2}
        result = await Runner.run(guard.wrap(agent) if guard else agent, scenario.prompt, **kwargs)
        summary, ended = (guard.summary(result) if guard else None), "final answer"
    except MaxTurnsExceeded:
        ended = "MaxTurnsExceeded (max_turns 10)"
    name = "OpenAI Agents SDK" + (" + loopwarden" if guarded else "")
    return Outcome(name, meter, world, _ended(summary, ended))


# -- PydanticAI ------------------------------------------------------------------------------------


async def run_pydantic_ai(scenario: Scenario, limit: int | None = None, guarded: bool = False) -> Outcome:
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UsageLimitExceeded
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    from loopwarden.adapters.pydantic_ai import Loopwarden

    meter, world = Meter(scenario), World()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        def payload() -> list[Any]:  # what reaches a real model: kinds, text, tool names, arguments
            return [
                [{k: getattr(p, k, None) for k in ("part_kind", "content", "tool_name", "args")} for p in m.parts]
                for m in messages
            ]

        prompts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)]
        last = messages[-1]
        asked_to_answer = not info.function_tools and isinstance(last, ModelRequest)
        asked_to_answer = asked_to_answer and isinstance(last.parts[-1], UserPromptPart)
        decision = meter.decide(
            prompt_chars=lambda: chars(payload()),
            tools_offered=not asked_to_answer,
            steered=scenario.metered and len(prompts) > 1,
        )
        if isinstance(decision, Answer):
            return ModelResponse(parts=[TextPart(decision.text)])
        return ModelResponse(parts=[ToolCallPart(decision.tool, decision.args, tool_call_id=f"c{meter.calls}")])

    guard = Loopwarden(_config(limit)) if guarded else None
    agent = Agent(
        FunctionModel(model), tools=_tool_functions(world, scenario.tools), capabilities=[guard] if guard else []
    )
    summary = None
    try:
        limits = None if limit is None else UsageLimits(request_limit=limit + 2)
        result = await agent.run(scenario.prompt, usage_limits=limits)
        summary, ended = (guard.summary(result) if guard else None), "final answer"
    except UsageLimitExceeded:
        ended = "UsageLimitExceeded (request_limit 50)"
    name = "PydanticAI" + (" + loopwarden" if guarded else "")
    return Outcome(name, meter, world, _ended(summary, ended))


RUNNERS: dict[str, Runner] = {
    "LangChain create_agent": run_langchain,
    "OpenAI Agents SDK": run_openai_agents,
    "PydanticAI": run_pydantic_ai,
}


# -- the tables ------------------------------------------------------------------------------------


@dataclass
class Pair:
    scenario: Scenario
    framework: str
    alone: Outcome
    guarded: Outcome
    loopwarden: Outcome

    @property
    def gap(self) -> int:
        """Model calls of the guarded run minus loopwarden's own on the same scenario."""
        return self.guarded.meter.calls - self.loopwarden.meter.calls


async def measure(frameworks: list[str]) -> list[Pair]:
    pairs = []
    for scenario in SCENARIOS:
        own = await run_loopwarden(scenario, None)
        for name in frameworks:
            runner = RUNNERS[name]
            pairs.append(
                Pair(scenario, name, await runner(scenario, None, False), await runner(scenario, None, True), own)
            )
    return pairs


def _calls(outcome: Outcome) -> str:
    return (">= " if outcome.meter.capped else "") + str(outcome.meter.calls)


def table(pairs: list[Pair]) -> str:
    lines = [
        "| scenario | framework | at its defaults: ended | model calls | with loopwarden: ended | model calls"
        " | loopwarden alone | checklist done (alone / guarded) |",
        "|---|---|---|---:|---|---:|---:|:---:|",
    ]
    for p in pairs:
        done = "/".join("yes" if p.scenario.completed(o.world) else "no" for o in (p.alone, p.guarded))
        lines.append(
            f"| {p.scenario.title} | {p.framework} | {p.alone.ended} | {_calls(p.alone)} | {p.guarded.ended}"
            f" | {_calls(p.guarded)} | {_calls(p.loopwarden)} | {done} |"
        )
    return "\n".join(lines)


def overhead_scenario(steps: int) -> Scenario:
    def distinct_reads(i: int, since_steer: int | None) -> Decision:
        return Call("read_file", {"path": f"part-{i}.txt"}) if i <= steps else Answer("done")

    return Scenario(
        "overhead", f"{steps} distinct reads", "Read every part.", ("read_file",), distinct_reads,
        onset=1, checklist=(), metered=False, min_cap=steps + 10,
    )  # fmt: skip


async def _per_step(name: str, guarded: bool, steps: int) -> float:
    began = time.perf_counter()
    outcome = await RUNNERS[name](overhead_scenario(steps), steps + 2, guarded)
    return (time.perf_counter() - began) / max(len(outcome.world.executed), 1)


async def overhead(frameworks: list[str], steps: int = STEPS, repeats: int = REPEATS) -> dict[str, tuple[float, float]]:
    """Median seconds per step of each framework alone and with the adapter, runs interleaved
    (alone, guarded, alone, ...) after one warm-up of each, so drift on a shared machine falls
    on both alike."""
    out = {}
    for name in frameworks:
        for guarded in (False, True):
            await _per_step(name, guarded, steps)
        times: dict[bool, list[float]] = {False: [], True: []}
        for i in range(repeats):
            for guarded in (False, True) if i % 2 == 0 else (True, False):
                times[guarded].append(await _per_step(name, guarded, steps))
        out[name] = (statistics.median(times[False]), statistics.median(times[True]))
    return out


def overhead_table(found: dict[str, tuple[float, float]]) -> str:
    lines = [
        f"| framework | per step alone | per step with loopwarden | ratio ({STEPS} steps, median of {REPEATS}) |",
        "|---|---:|---:|---:|",
    ]
    for name, (alone, guarded) in found.items():
        lines.append(f"| {name} | {alone * 1000:.2f} ms | {guarded * 1000:.2f} ms | {guarded / alone:.2f}x |")
    return "\n".join(lines)


def main() -> int:
    warnings.simplefilter("ignore")
    wanted = [a for a in sys.argv[1:] if not a.startswith("--")]
    frameworks = [n for n in RUNNERS if not wanted or n in wanted]
    pairs = asyncio.run(measure(frameworks))
    far = [p for p in pairs if p.gap > 1]  # later than loopwarden's own by more than one model call
    speed = overhead_table(asyncio.run(overhead(frameworks)))
    block = (
        f"{table(pairs)}\n\n{speed}\n\n_Guarded runs that needed more than one model call more than loopwarden's own:"
        f" {len(far)} of {len(pairs)}. Same scripted model and tools in every run; time per step alone and guarded"
        f" interleaved on a shared 2-core machine (ratios move by tens of percent from run to run); {versions()}._\n"
    )
    print(block)
    if "--readme" in sys.argv:
        write_blocks({"adapters": block})
    return 1 if far else 0


if __name__ == "__main__":
    raise SystemExit(main())
