"""loopwarden: tool-calling agents that do not loop. The model proposes; the runtime decides."""

from .agent import Agent, RunResult
from .approval import ApprovalGate, PendingApproval
from .config import LoopConfig
from .events import Event, RunFinished, Totals, parse_event
from .executor import Executor, RetryPolicy
from .guard import Budgets, Ladder, Price
from .models import FunctionModel, ModelReply, ModelRequest, ScriptedModel, ToolCall, Usage, call
from .permissions import Principal
from .router import ClassifierRouter, Fallback, Intent, RuleRouter, model_classifier
from .slots import EnumSlot, RunClock, SlotSpec, period_slot
from .state import ChecklistItem, RunState
from .tools import Tool, ToolRegistry, ToolResult, tool
from .toolsearch import ToolSearch

__all__ = [
    "Agent",
    "ApprovalGate",
    "Budgets",
    "ChecklistItem",
    "ClassifierRouter",
    "EnumSlot",
    "Event",
    "Executor",
    "Fallback",
    "FunctionModel",
    "Intent",
    "Ladder",
    "LoopConfig",
    "ModelReply",
    "ModelRequest",
    "PendingApproval",
    "Price",
    "Principal",
    "RetryPolicy",
    "RuleRouter",
    "RunClock",
    "RunFinished",
    "RunResult",
    "RunState",
    "ScriptedModel",
    "SlotSpec",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolResult",
    "ToolSearch",
    "Totals",
    "Usage",
    "call",
    "model_classifier",
    "parse_event",
    "period_slot",
    "tool",
]
__version__ = "0.1.0"
