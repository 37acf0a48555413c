"""loopwarden's guard in a LangChain v1 agent: a model stuck re-reading one file is answered from
memory, nudged, narrowed and stopped, and the agent's state says why. Offline (a scripted model).

    pip install 'loopwarden[langchain]'
    python examples/langchain_guard.py
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from loopwarden import LoopConfig
from loopwarden.adapters.langchain import LoopwardenMiddleware


class StuckModel(BaseChatModel):
    """Stands in for a model that collapsed: it asks for the same file whatever it is told."""

    @property
    def _llm_type(self) -> str:
        return "stuck"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(offered=[t.name for t in tools])

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if not kw.get("offered") and messages[-1].type == "human":  # asked for the answer, tools gone
            message = AIMessage(content="The pump notes say flow rose linearly with speed.")
        else:
            call = {
                "name": "read_file",
                "args": {"path": "pump.txt"},
                "id": f"call{len(messages)}",
                "type": "tool_call",
            }
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


reads = []


def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: the file name
    """
    reads.append(path)
    return "The pump was run at 3 speeds; flow rose linearly."


def main() -> None:
    agent = create_agent(StuckModel(), [read_file], middleware=[LoopwardenMiddleware(LoopConfig(policy="degrade"))])
    state = agent.invoke({"messages": [("user", "Summarise pump.txt")]})
    guard = state["loopwarden"]
    print(f"model calls: {sum(m.type == 'ai' for m in state['messages'])}; the file was read {len(reads)} time(s)")
    print(f"guard: status={guard['status']} stop_reason={guard['stop_reason']} detectors={guard['detectors']}")
    print(f"answer: {state['messages'][-1].content}")


if __name__ == "__main__":
    main()
