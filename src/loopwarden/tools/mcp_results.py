"""What an MCP server says, in loopwarden's terms: a tool's annotations as the guard's flags, and
every outcome of a `tools/call` (a result, an `isError` result, a protocol error, a dead server)
as a structured `ToolResult`. No import of the `mcp` SDK here: the objects are read by attribute.

Annotations are hints, read as the server declares them (a missing one as the table says):

- `readOnlyHint: true` -> `side_effect="read"` (may run alongside other reads in a turn).
- `readOnlyHint` absent or false -> `side_effect="write"`: the spec's default is "not read-only"; a
  write is a barrier in its turn and tells the guard the world may have changed.
- `destructiveHint: true` (and not read-only) -> `requires_approval=True`: the approval gate decides,
  or the run pauses (`approve_destructive=False` leaves it to the caller). An absent hint asks for
  no approval, although the spec's default is "destructive": every unannotated tool would pause.
- `idempotentHint: true` -> `idempotent=True`: a write the executor may retry after a timeout or a
  lost connection (a write without it runs once; the model is told it was not retried). It is not
  `repeatable`: that tells the guard identical calls are legitimate (a poll whose answer may change);
  an idempotent tool is the opposite, its repeat is what the ladder answers from memory and then stops.
"""

from __future__ import annotations

from typing import Any

from . import SideEffect, ToolResult

# JSON-RPC / MCP error codes (mcp_types.jsonrpc), kept here so this module needs no SDK.
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

SERVER_GONE = "mcp_server_gone"
"""The error type of every call to a server whose connection ended (its process exited, crashed
or was closed): not retryable, its tools are gone for the rest of the run."""


def annotation_flags(annotations: Any, *, approve_destructive: bool = True) -> dict[str, Any]:
    """`side_effect`, `idempotent` and `requires_approval` from a tool's `ToolAnnotations` (or None)."""
    read_only = getattr(annotations, "read_only_hint", None) is True
    side_effect: SideEffect = "read" if read_only else "write"
    destructive = getattr(annotations, "destructive_hint", None) is True and not read_only
    return {
        "side_effect": side_effect,
        "idempotent": getattr(annotations, "idempotent_hint", None) is True,
        "requires_approval": approve_destructive and destructive,
    }


def _block(content: Any) -> Any:
    """One content block as the model reads it: text as text; other kinds described, not inlined
    (an image's base64 would flood the context)."""
    kind = getattr(content, "type", None)
    if kind == "text":
        return str(getattr(content, "text", ""))
    if kind in ("image", "audio"):
        data = str(getattr(content, "data", ""))
        return {"type": kind, "mime_type": getattr(content, "mime_type", None), "bytes": len(data) * 3 // 4}
    if kind == "resource_link":
        return {"type": kind, "uri": str(getattr(content, "uri", "")), "name": getattr(content, "name", None)}
    if kind == "resource":
        resource = getattr(content, "resource", None)
        text = getattr(resource, "text", None)
        return {"type": kind, "uri": str(getattr(resource, "uri", "")), **({"text": text} if text else {})}
    dump = getattr(content, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else str(content)


def content_of(result: Any) -> Any:
    """The data of a `CallToolResult`: its structured content when it has some, else its content
    blocks (one text block as a plain string)."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    blocks = [_block(c) for c in getattr(result, "content", None) or []]
    if len(blocks) == 1:
        return blocks[0]
    return blocks or None


def _text_of(result: Any) -> str:
    texts = [str(getattr(c, "text", "")) for c in getattr(result, "content", None) or [] if hasattr(c, "text")]
    return "\n".join(t for t in texts if t) or "the tool reported an error"


def call_result(result: Any, tool: str) -> ToolResult:
    """A `CallToolResult`: `isError` is the tool's own failure (its text is what the model needs
    to correct the call); anything else is success."""
    if getattr(result, "is_error", False):
        structured = getattr(result, "structured_content", None)
        return ToolResult.failure(
            "tool_error",
            _text_of(result)[:2000],
            retryable=False,
            user_action=f"read the error and change the call to {tool}, or try another approach",
            data=structured,
        )
    return ToolResult.success(content_of(result))


def protocol_failure(code: int, message: str, tool: str, server: str) -> ToolResult:
    """An MCP error response (or the SDK's own: closed connection, timeout) as a result."""
    if code == CONNECTION_CLOSED:
        return server_gone(server, message)
    if code == REQUEST_TIMEOUT:
        return ToolResult.failure(
            "timeout",
            f"MCP server {server!r} did not answer {tool} in time: {message}",
            retryable=True,
            user_action="try a smaller request, or another approach",
        )
    if code == INVALID_PARAMS:
        return ToolResult.failure(
            "invalid_arguments",
            message,
            user_action=f"call {tool} again with arguments matching its schema",
        )
    if code == METHOD_NOT_FOUND:
        return ToolResult.failure("unknown_tool", f"MCP server {server!r} has no tool {tool}: {message}")
    retryable = code == INTERNAL_ERROR
    return ToolResult.failure("mcp_error", f"MCP error {code} from {server!r}: {message}", retryable=retryable)


def server_gone(server: str, detail: str = "") -> ToolResult:
    why = f" ({detail})" if detail else ""
    return ToolResult.failure(
        SERVER_GONE,
        f"the MCP server {server!r} is no longer connected{why}: its tools cannot be called in this run",
        retryable=False,
        user_action="finish without this server's tools, or tell the user it is unavailable",
    )


def transport_failure(error: BaseException, server: str) -> ToolResult:
    """A failure below MCP (a refused or reset HTTP connection): retryable, the server may be back."""
    return ToolResult.failure(
        "connection_error",
        f"MCP server {server!r} unreachable: {type(error).__name__}: {error}"[:2000],
        retryable=True,
    )
