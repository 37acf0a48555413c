"""Guarding one proposed call before anything runs: parse its arguments, fingerprint it, ask
the repeated-call ladder, then check that the tool exists, is offered, is permitted, and that
the arguments match its schema. Whatever is refused becomes a structured result the model
reads; only what passes every check reaches the executor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .executor import Execution, validate_arguments
from .guard.fingerprint import fingerprint
from .guard.ladder import Finding, Rung
from .guard.repeat import DETECTOR, RepeatDecision, RepeatGuard, repeat_notice
from .models.arguments import parse_arguments
from .models.base import ToolCall
from .permissions import refusal
from .slots import Prepared
from .state import CallRecord
from .tools import Tool, ToolRegistry, ToolResult


@dataclass
class Proposal:
    call: ToolCall
    turn: int
    arguments: Any
    fingerprint: str
    tool: Tool | None
    decision: RepeatDecision
    refused_by: str | None = None
    validated: BaseModel | None = None
    result: ToolResult | None = None
    attempts: int = 0
    changed: dict[str, tuple[Any, Any]] | None = None
    """Arguments code rewrote or filled in (slots.ArgumentPolicy): name -> (proposed, used)."""
    duration_ms: float = 0.0
    repair: str | None = None
    """How the model's argument text was mended to be read (models.arguments), if it was."""

    @property
    def runnable(self) -> bool:
        return self.validated is not None and self.result is None

    @property
    def cached(self) -> bool:
        return self.decision.cached is not None and self.decision.action != "stopped"

    def set_execution(self, execution: Execution) -> None:
        self.result, self.attempts, self.duration_ms = (
            execution.result,
            execution.attempts,
            execution.duration_ms,
        )

    @property
    def record(self) -> CallRecord:
        return CallRecord(
            turn=self.turn,
            call_id=self.call.id,
            tool=self.tool.qualified_name if self.tool else self.call.name,
            arguments=self.arguments,
            fingerprint=self.fingerprint,
            result=self.result,
            executed=self.attempts > 0,
            cached=self.cached,
            exempt=bool(self.tool and (self.tool.repeatable or self.tool.terminal)),
            writes=bool(self.tool and self.tool.side_effect == "write"),
        )

    def verdict_fields(self) -> dict[str, Any]:
        action, count = self.decision.action, self.decision.count
        if action == "stopped":
            reason = f"identical call #{count}: phase stopped"
        elif action in ("cached", "nudged", "narrowed"):
            reason = f"identical call #{count}" + (": answered from the earlier result" if self.cached else "")
        elif self.refused_by is not None:
            assert self.result is not None
            return {
                "detector": self.refused_by,
                "action": "refused",
                "reason": self.result.message or "",
                "count": count,
            }
        else:
            return {"detector": "guard", "action": "allowed", "reason": self._allowed_reason(), "count": count}
        return {
            "detector": DETECTOR,
            "action": action,
            "reason": reason,
            "count": count,
            "evidence": [self.fingerprint],
        }

    def _allowed_reason(self) -> str:
        if not self.changed:
            return "allowed"
        edits = ", ".join(f"{name}={used!r} (proposed {old!r})" for name, (old, used) in self.changed.items())
        return f"allowed; set by code: {edits}"

    def result_fields(self) -> dict[str, Any]:
        assert self.result is not None
        r = self.result
        return {
            "call_id": self.call.id,
            "tool": self.call.name,
            "ok": r.ok,
            "error_type": r.error_type,
            "retryable": r.retryable,
            "message": r.message,
            "cached": self.cached,
            "executed": self.attempts > 0,
            "attempts": self.attempts,
            "duration_ms": self.duration_ms,
            "preview": r.to_model_content()[:300],
        }

    def finding(self, count: int, rung: Rung = Rung.STOP) -> Finding:
        name = self.tool.wire_name if self.tool else self.call.name
        return Finding(
            detector=DETECTOR,
            rung=rung,
            reason=f"repeated identical tool call {name} (#{count})",
            stop_reason="repeated_call",
            evidence=[self.fingerprint],
            tools=frozenset({name}),
            count=count,
        )


class ProposalChecker:
    def __init__(
        self,
        registry: ToolRegistry,
        repeats: RepeatGuard,
        roles: frozenset[str] | None,
        prepare: Callable[[Tool, Any], Prepared] | None = None,
    ) -> None:
        self.registry, self.repeats, self.roles = registry, repeats, roles
        self.prepare = prepare
        """Normalises and pins arguments (slots.ArgumentPolicy) before fingerprint and validation."""
        self.duplicates_avoided = 0

    def check(self, call: ToolCall, turn: int, offered: set[str]) -> Proposal:
        parsed = parse_arguments(call.arguments)
        arguments, parse_error = parsed.value, parsed.error
        tool = self.registry.get(call.name)
        prepared = self.prepare(tool, arguments) if tool and self.prepare and parse_error is None else None
        arguments = prepared.arguments if prepared else arguments
        fp = fingerprint(tool.qualified_name if tool else call.name, arguments)
        decision = self.repeats.check(fp, tool, turn) if tool else self.repeats.check_unknown(fp, turn)
        p = Proposal(call, turn, arguments, fp, tool, decision, changed=prepared.changed if prepared else None)
        p.repair = parsed.repair
        if decision.action == "stopped":
            p.result = ToolResult.failure(
                "repeated_call",
                f"this identical call was made {decision.count} times; it was not run",
                user_action="stop repeating this call",
            )
        elif decision.cached is not None:
            self.duplicates_avoided += 1
            p.result = repeat_notice(decision.cached, decision.count, decision.first_turn)
        else:
            self._refuse_or_validate(p, parse_error, offered, prepared.refusal if prepared else None)
        return p

    def _refuse_or_validate(
        self, p: Proposal, parse_error: str | None, offered: set[str], slot_refusal: ToolResult | None = None
    ) -> None:
        tool = p.tool
        if tool is None:
            available = ", ".join(sorted(offered)) or "none"
            p.refused_by, p.result = (
                "unknown_tool",
                ToolResult.failure(
                    "unknown_tool", f"there is no tool named {p.call.name!r}; available tools: {available}"
                ),
            )
        elif parse_error is not None:
            p.refused_by, p.result = (
                "schema",
                ToolResult.failure(
                    "invalid_arguments",
                    f"arguments are not valid JSON ({parse_error})",
                    user_action=f"call {tool.wire_name} again with a JSON object as arguments",
                ),
            )
        elif (not_allowed := refusal(tool, offered, self.roles)) is not None:
            p.refused_by, p.result = "permission", not_allowed
        elif slot_refusal is not None:
            p.refused_by, p.result = "slots", slot_refusal
        else:
            validated = validate_arguments(tool, p.arguments)
            if isinstance(validated, ToolResult):
                p.refused_by, p.result = "schema", validated
            else:
                p.validated = validated
