"""loopwarden: tool-calling agents that do not loop. The model proposes; the runtime decides."""

from .config import LoopConfig
from .events import Event, RunFinished, Totals, parse_event
from .executor import Executor, RetryPolicy
from .guard import Budgets, Ladder, Price
from .loop import Agent, RunResult
from .models import FunctionModel, ModelReply, ModelRequest, ScriptedModel, ToolCall, Usage, call
from .state import ChecklistItem, RunState
from .tools import Tool, ToolRegistry, ToolResult, tool

__all__ = [
    "Agent",
    "Budgets",
    "ChecklistItem",
    "Event",
    "Executor",
    "FunctionModel",
    "Ladder",
    "LoopConfig",
    "ModelReply",
    "ModelRequest",
    "Price",
    "RetryPolicy",
    "RunFinished",
    "RunResult",
    "RunState",
    "ScriptedModel",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolResult",
    "Totals",
    "Usage",
    "call",
    "parse_event",
    "tool",
]
__version__ = "0.1.0"
