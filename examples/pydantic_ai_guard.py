"""loopwarden's guard in a PydanticAI agent: a model stuck re-reading one file is answered from
memory, nudged, narrowed and stopped, and the guard says why. Offline (a scripted model).

    pip install 'loopwarden[pydantic-ai]'
    python examples/pydantic_ai_guard.py
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from loopwarden import LoopConfig
from loopwarden.adapters.pydantic_ai import Loopwarden

calls = []


def stuck_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for a model that collapsed: it asks for the same file whatever it is told."""
    calls.append(len(messages))
    asked = isinstance(messages[-1], ModelRequest) and isinstance(messages[-1].parts[-1], UserPromptPart)
    if not info.function_tools and asked:  # asked for the answer, tools gone
        return ModelResponse(parts=[TextPart("The pump notes say flow rose linearly with speed.")])
    return ModelResponse(parts=[ToolCallPart("read_file", {"path": "pump.txt"}, tool_call_id=f"call{len(calls)}")])


reads = []


def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: the file name
    """
    reads.append(path)
    return "The pump was run at 3 speeds; flow rose linearly."


def main() -> None:
    guard = Loopwarden(LoopConfig(policy="degrade"))
    agent = Agent(FunctionModel(stuck_model), tools=[read_file], capabilities=[guard])
    result = agent.run_sync("Summarise pump.txt")
    summary = guard.summary(result) or {}
    print(f"model calls: {len(calls)}; the file was read {len(reads)} time(s)")
    print(f"guard: status={summary['status']} stop_reason={summary['stop_reason']} detectors={summary['detectors']}")
    print(f"answer: {result.output}")


if __name__ == "__main__":
    main()
