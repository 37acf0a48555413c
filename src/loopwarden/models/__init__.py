"""Models: the protocol the runtime speaks, scripted stand-ins, and (lazily) the
OpenAI-compatible client."""

from .base import Message, Model, ModelError, ModelReply, ModelRequest, ToolCall, ToolChoice, Usage
from .scripted import FunctionModel, ScriptedModel, call, offered_tool_names

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
