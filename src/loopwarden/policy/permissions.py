"""Permissions: a run acts for a principal with roles; a tool may declare the roles allowed to
call it. A call outside what this step offers, or outside the principal's roles, is refused
before anything runs, with `error_type="not_allowed"`."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..tools import Tool, ToolResult


@dataclass(frozen=True)
class Principal:
    """Who a run acts for. `roles` is what tools' `roles=` are checked against."""

    id: str = "anonymous"
    roles: frozenset[str] = frozenset()

    @classmethod
    def of(cls, id: str, roles: Iterable[str]) -> Principal:
        return cls(id, frozenset(roles))


def permits(tool: Tool, roles: frozenset[str] | None) -> bool:
    """A tool without declared roles is open to everyone; otherwise one role must match."""
    return tool.roles is None or bool(roles and tool.roles & roles)


def refusal(tool: Tool, offered: Collection[str], roles: frozenset[str] | None) -> ToolResult | None:
    """The `not_allowed` result for a call this step may not make, or None when it may."""
    if tool.wire_name not in offered and tool.qualified_name not in offered:
        return ToolResult.failure(
            "not_allowed",
            f"{tool.wire_name} is not available in this step",
            user_action="use one of the tools you were offered",
        )
    if tool.roles is not None and not permits(tool, roles):  # (an open tool: no call to ask)
        return ToolResult.failure(
            "not_allowed",
            f"{tool.wire_name} requires one of the roles: {', '.join(sorted(tool.roles))}",
            user_action="do not retry; tell the user this action needs other permissions",
        )
    return None
