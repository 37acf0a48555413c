"""loopwarden: tool-calling agents that do not loop. The model proposes; the runtime decides."""

from .agent import Agent, RunResult, TextStream
from .approval import ApprovalGate, PendingApproval
from .config import LoopConfig
from .context import RunContext
from .errors import (
    CaseError,
    ConfigError,
    LoopwardenError,
    ModelError,
    OutputValidationError,
    RunNotFound,
    ToolDefinitionError,
    TraceFormatError,
)
from .events import Event, EventParser, RunFinished, RuntimeEvent, Totals, UnknownEvent, parse_event
from .executor import Executor
from .guard import Budgets, Ladder, Price
from .handoff import handoff
from .models import FunctionModel, ModelReply, ModelRequest, ScriptedModel, ToolCall, Usage, call
from .permissions import Principal
from .retry import RetryPolicy
from .router import ClassifierRouter, Fallback, Intent, RuleRouter, model_classifier
from .slots import EnumSlot, RunClock, SlotSpec, period_slot
from .state import ChecklistItem, RunState
from .tools import Tool, ToolRegistry, ToolResult, tool
from .toolsearch import ToolSearch

__all__ = [
    "Agent",
    "ApprovalGate",
    "Budgets",
    "CaseError",
    "ChecklistItem",
    "ClassifierRouter",
    "ConfigError",
    "EnumSlot",
    "Event",
    "EventParser",
    "Executor",
    "Fallback",
    "FunctionModel",
    "Intent",
    "Ladder",
    "LoopConfig",
    "LoopwardenError",
    "ModelError",
    "ModelReply",
    "ModelRequest",
    "OutputValidationError",
    "PendingApproval",
    "Price",
    "Principal",
    "RetryPolicy",
    "RuleRouter",
    "RunClock",
    "RunContext",
    "RunFinished",
    "RunNotFound",
    "RunResult",
    "RunState",
    "RuntimeEvent",
    "ScriptedModel",
    "SlotSpec",
    "TextStream",
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "ToolSearch",
    "Totals",
    "TraceFormatError",
    "UnknownEvent",
    "Usage",
    "call",
    "handoff",
    "model_classifier",
    "parse_event",
    "period_slot",
    "tool",
]
__version__ = "0.1.0"
