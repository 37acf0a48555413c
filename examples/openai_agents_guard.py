"""loopwarden's guard in an OpenAI Agents SDK agent: a model stuck re-reading one file is answered
from memory, nudged, narrowed and stopped, and the guard says why. Offline (a scripted model).

    pip install 'loopwarden[agents]'
    python examples/openai_agents_guard.py
"""

from __future__ import annotations

from typing import Any

from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from loopwarden import LoopConfig
from loopwarden.adapters.openai_agents import LoopwardenGuard


class StuckModel(Model):
    """Stands in for a model that collapsed: it asks for the same file whatever it is told."""

    calls = 0

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        StuckModel.calls += 1
        last = input[-1] if isinstance(input, list) and input else {}
        if not tools and isinstance(last, dict) and last.get("role") == "user":  # asked for the answer, tools gone
            text = ResponseOutputText(
                text="The pump notes say flow rose linearly with speed.", type="output_text", annotations=[]
            )
            output: list[Any] = [
                ResponseOutputMessage(id="m", content=[text], role="assistant", status="completed", type="message")
            ]
        else:
            call_id = f"call{StuckModel.calls}"
            arguments = '{"path": "pump.txt"}'
            output = [
                ResponseFunctionToolCall(
                    id=call_id, call_id=call_id, name="read_file", arguments=arguments, type="function_call"
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


reads = []


@function_tool
def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: the file name
    """
    reads.append(path)
    return "The pump was run at 3 speeds; flow rose linearly."


def main() -> None:
    set_tracing_disabled(True)  # offline: no traces sent to OpenAI
    guard = LoopwardenGuard(LoopConfig(policy="degrade"))
    agent = guard.wrap(Agent(name="analyst", model=StuckModel(), tools=[read_file]))
    result = Runner.run_sync(agent, "Summarise pump.txt")
    summary = guard.summary(result) or {}
    print(f"model calls: {StuckModel.calls}; the file was read {len(reads)} time(s)")
    print(f"guard: status={summary['status']} stop_reason={summary['stop_reason']} detectors={summary['detectors']}")
    print(f"answer: {result.final_output}")


if __name__ == "__main__":
    main()
