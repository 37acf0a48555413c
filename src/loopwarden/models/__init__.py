"""Models: the protocol the runtime speaks, scripted stand-ins, and (lazily) the
OpenAI-compatible client."""

from typing import Any

from .base import Message, Model, ModelError, ModelReply, ModelRequest, ToolCall, ToolChoice, Usage
from .scripted import FunctionModel, ScriptedModel, call, offered_tool_names

# Loaded on first use: the client pulls in the `openai` SDK, and the config imports the
# budgets, which import the events, which import this package.
_LAZY = {
    "EndpointConfig": "config",
    "load_endpoint_config": "config",
    "default_prices": "config",
    "OpenAICompatModel": "openai_compat",
    "build_model": "openai_compat",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FunctionModel",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "ModelRequest",
    "ScriptedModel",
    "ToolCall",
    "ToolChoice",
    "Usage",
    "call",
    "offered_tool_names",
]
