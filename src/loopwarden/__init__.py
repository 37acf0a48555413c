"""loopwarden: tool-calling agents that do not loop. The model proposes; the runtime decides.

The names below load on first use (PEP 562): `import loopwarden` alone imports no runtime module,
so `loopwarden --help` (loopwarden.cli) starts without the runtime; `from loopwarden import Agent`
imports what Agent needs."""

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import Agent, RunResult, TextStream
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
    from .policy.approval import ApprovalGate, PendingApproval
    from .policy.permissions import Principal
    from .policy.router import ClassifierRouter, Fallback, Intent, RuleRouter, model_classifier
    from .policy.slots import EnumSlot, RunClock, SlotSpec, period_slot
    from .retry import RetryPolicy
    from .state import ChecklistItem, RunState
    from .tools import Tool, ToolRegistry, ToolResult, tool
    from .tools.search import ToolSearch

_WHERE: dict[str, str] = {
    "Agent": "agent",
    "ApprovalGate": "policy.approval",
    "Budgets": "guard",
    "CaseError": "errors",
    "ChecklistItem": "state",
    "ClassifierRouter": "policy.router",
    "ConfigError": "errors",
    "EnumSlot": "policy.slots",
    "Event": "events",
    "EventParser": "events",
    "Executor": "executor",
    "Fallback": "policy.router",
    "FunctionModel": "models",
    "Intent": "policy.router",
    "Ladder": "guard",
    "LoopConfig": "config",
    "LoopwardenError": "errors",
    "ModelError": "errors",
    "ModelReply": "models",
    "ModelRequest": "models",
    "OutputValidationError": "errors",
    "PendingApproval": "policy.approval",
    "Price": "guard",
    "Principal": "policy.permissions",
    "RetryPolicy": "retry",
    "RuleRouter": "policy.router",
    "RunClock": "policy.slots",
    "RunContext": "context",
    "RunFinished": "events",
    "RunNotFound": "errors",
    "RunResult": "agent",
    "RunState": "state",
    "RuntimeEvent": "events",
    "ScriptedModel": "models",
    "SlotSpec": "policy.slots",
    "TextStream": "agent",
    "Tool": "tools",
    "ToolCall": "models",
    "ToolDefinitionError": "errors",
    "ToolRegistry": "tools",
    "ToolResult": "tools",
    "ToolSearch": "tools.search",
    "Totals": "events",
    "TraceFormatError": "errors",
    "UnknownEvent": "events",
    "Usage": "models",
    "call": "models",
    "handoff": "handoff",
    "model_classifier": "policy.router",
    "parse_event": "events",
    "period_slot": "policy.slots",
    "tool": "tools",
}
"""Each public name and the module it lives in."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _WHERE and isinstance(value, types.ModuleType):
            return  # the submodule `handoff`, bound by the import system, does not hide the function
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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
