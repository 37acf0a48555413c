"""Guarding one proposed call before anything runs: parse its arguments, validate them against
the tool's schema, fingerprint what validation made of them, ask the repeated-call ladder, then
check that the tool exists, is offered and is permitted. Whatever is refused becomes a
structured result the model reads; only what passes every check reaches the executor.

The fingerprint is taken of the validated arguments (defaults filled in, values coerced to
their schema types), so `{"path": "a"}`, `{"path": "a", "offset": 0}` and `{"offset": "0",
"path": "a"}` are one call; the model's raw argument text is kept for the trace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .events import Head
from .executor import Execution, validate_arguments
from .guard.fingerprint import canonical_json, hash_of_canonical
from .guard.ladder import Finding, Rung
from .guard.repeat import DETECTOR, RepeatDecision, RepeatGuard, repeat_notice
from .hotpath.fastjson import json_object
from .models.arguments import Parsed, parse_arguments
from .models.base import ToolCall
from .policy.permissions import refusal
from .policy.slots import ArgumentPolicy
from .state import CallRecord
from .tools import ArgumentsAsGiven, Tool, ToolRegistry, ToolResult


@dataclass(slots=True)
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
    shares: Proposal | None = None
    """An identical call earlier in the same turn: this one does not run, it gets that one's result."""
    repair: str | None = None
    """How the model's argument text was mended to be read (models.arguments), if it was."""
    canonical: str = ""
    """The canonical JSON of `arguments` (the fingerprint's tail), for `args_hash`."""
    shown: CallRecord | None = None
    """The record `on_calls` was shown, when no detector there can have kept it (`result_record`)."""

    @property
    def args_hash(self) -> str:
        return hash_of_canonical(self.canonical)

    @property
    def runnable(self) -> bool:
        return self.validated is not None and self.result is None and self.shares is None

    @property
    def cached(self) -> bool:
        answered = self.decision.cached is not None or self.shares is not None
        return answered and self.decision.action != "stopped"

    def take_shared_result(self) -> None:
        """After the turn ran: the result of the identical call this one shares."""
        if self.shares is not None and self.result is None:
            assert self.shares.result is not None
            self.result = repeat_notice(self.shares.result, self.decision.count, self.turn)

    def set_execution(self, execution: Execution) -> None:
        self.result, self.attempts, self.duration_ms = (
            execution.result,
            execution.attempts,
            execution.duration_ms,
        )

    @property
    def record(self) -> CallRecord:
        tool, decision = self.tool, self.decision
        call = self.call.__dict__  # read once (a pydantic instance's attributes go through its `__getattr__` hook)
        answered = decision.cached is not None or self.shares is not None
        return CallRecord(  # by position, in field order: keywords to a class cost a dict each (half the cost)
            self.turn,
            call["id"],
            tool.qualified_name if tool else call["name"],
            self.arguments,
            self.fingerprint,
            self.result,
            self.attempts > 0,  # executed
            answered and decision.action != "stopped",  # cached, without the property's call
            bool(tool and (tool.repeatable or tool.terminal)),  # exempt
            bool(tool and tool.side_effect == "write"),  # writes
        )

    def shown_record(self, reusable: bool) -> CallRecord:
        """The record `on_calls` is shown; kept to become the result record when `reusable`."""
        record = self.record
        if reusable:
            self.shown = record
        return record

    def result_record(self) -> CallRecord:
        """The record with the call's result: the one `on_calls` was shown, filled in, when it was
        kept (`shown_record`), else a new one (a detector may keep what `on_calls` gave it)."""
        shown = self.shown
        if shown is None:
            return self.record
        shown.result, shown.executed, shown.cached = self.result, self.attempts > 0, self.cached
        return shown

    def proposed_fields(self, turn: int, head: Head) -> dict[str, Any]:
        """Every `tool_call_proposed` field in field order, the four every event has from `head`."""
        call = self.call.__dict__  # read once (a pydantic instance's attributes go through its `__getattr__` hook)
        kind, run_id, seq, ts = head
        return {
            "type": kind,
            "run_id": run_id,
            "seq": seq,
            "ts": ts,
            "turn": turn,
            "call_id": call["id"],
            "tool": call["name"],
            "arguments": self.arguments,
            "args_hash": self.args_hash,
            "raw_arguments": call["arguments"],
            "repaired": self.repair,
        }

    def verdict_fields(self, turn: int, head: Head) -> dict[str, Any]:
        """Every `guard_verdict` field in field order, the four every event has from `head`."""
        action, count = self.decision.action, self.decision.count
        if self.shares is not None and action == "allowed":
            action = "cached"
        call = self.call.__dict__
        call_id, name = call["id"], call["name"]
        if action == "stopped":
            reason = f"identical call #{count}: phase stopped"
        elif action in ("cached", "nudged", "narrowed"):
            reason = f"identical call #{count}" + (": answered from the earlier result" if self.cached else "")
        elif self.refused_by is not None:
            assert self.result is not None
            reason = self.result.message or ""
            return _verdict(head, turn, self.refused_by, "refused", reason, call_id, name, count, [])
        else:
            return _verdict(head, turn, "guard", "allowed", self._allowed_reason(), call_id, name, count, [])
        return _verdict(head, turn, DETECTOR, action, reason, call_id, name, count, [self.fingerprint])

    def _allowed_reason(self) -> str:
        if not self.changed:
            return "allowed"
        edits = ", ".join(f"{name}={used!r} (proposed {old!r})" for name, (old, used) in self.changed.items())
        return f"allowed; set by code: {edits}"

    def result_fields(
        self, turn: int, head: Head, checklist_done: list[str], content: str | None = None
    ) -> dict[str, Any]:
        """Every `tool_call_finished` field in field order, the four every event has from `head`;
        `content` is the result's model content when known."""
        assert self.result is not None
        r = self.result.__dict__  # read once each (a frozen model's own values)
        call = self.call.__dict__
        kind, run_id, seq, ts = head
        return {
            "type": kind,
            "run_id": run_id,
            "seq": seq,
            "ts": ts,
            "turn": turn,
            "call_id": call["id"],
            "tool": call["name"],
            "ok": r["ok"],
            "error_type": r["error_type"],
            "retryable": r["retryable"],
            "message": r["message"],
            "cached": self.cached,
            "executed": self.attempts > 0,
            "attempts": self.attempts,
            "duration_ms": self.duration_ms,
            "preview": (self.result.to_model_content() if content is None else content)[:300],
            "checklist_done": checklist_done,
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


def _verdict(
    head: Head,
    turn: int,
    detector: str,
    action: str,
    reason: str,
    call_id: str,
    tool: str,
    count: int,
    evidence: list[str],
) -> dict[str, Any]:
    kind, run_id, seq, ts = head
    return {
        "type": kind,
        "run_id": run_id,
        "seq": seq,
        "ts": ts,
        "turn": turn,
        "detector": detector,
        "action": action,
        "reason": reason,
        "call_id": call_id,
        "tool": tool,
        "count": count,
        "evidence": evidence,
    }


def first_stopped(proposals: list[Proposal]) -> Proposal | None:
    """The first call of a turn the repeated-call ladder stopped."""
    for p in proposals:
        if p.decision.action == "stopped":
            return p
    return None


def terminal_result(proposals: list[Proposal]) -> Proposal | None:
    """The first call of a turn to a terminal tool that succeeded: it ends the phase."""
    for p in proposals:
        if p.tool is not None and p.tool.terminal and p.result is not None and p.result.ok:
            return p
    return None


_AS_SENT = Parsed(None)
"""A JSON object as sent: no error, nothing repaired (its value is read by `json_object`)."""


class ProposalChecker:
    def __init__(
        self,
        registry: ToolRegistry,
        repeats: RepeatGuard,
        roles: frozenset[str] | None,
        policy: ArgumentPolicy | None = None,
    ) -> None:
        self.registry, self.repeats, self.roles = registry, repeats, roles
        self.policy = policy
        """Normalises and pins arguments before fingerprint and validation (when it has anything to)."""
        self.duplicates_avoided = 0
        self._batch_turn = -1
        self._batch: dict[str, Proposal] = {}  # fingerprint -> its first runnable call this turn

    def check(self, call: ToolCall, turn: int, offered: set[str], alone: bool = False) -> Proposal:
        """Guard one proposed call of this turn (`alone`: the turn's only call, with nothing to share)."""
        c = call.__dict__  # read once (each attribute of a pydantic instance goes through its `__getattr__` hook)
        name, raw = c["name"], c["arguments"]
        arguments = json_object(raw)  # the common call: an object as sent, read as parse_arguments reads it
        parsed = _AS_SENT if arguments is not None else parse_arguments(raw)
        if arguments is None:
            arguments = parsed.value
        parse_error = parsed.error
        tool = self.registry.get(name)
        policy = self.policy if tool is not None and parse_error is None else None
        prepared = policy.prepare(tool, arguments) if policy is not None and policy.active else None  # type: ignore[arg-type]
        arguments = prepared.arguments if prepared else arguments
        validated = validate_arguments(tool, arguments) if tool is not None and parse_error is None else None
        # validate_arguments refuses with ToolResult.failure (exactly a ToolResult): its type says
        # which, where an isinstance with a pydantic class costs ~1,000 instructions when it fails.
        if validated is not None and type(validated) is not ToolResult:
            arguments = normalised(validated)
        canonical = canonical_json(arguments)
        fp = f"{tool.qualified_name if tool else name}:{canonical}"  # guard.fingerprint.fingerprint
        decision = self.repeats.check(fp, tool, turn) if tool else self.repeats.check_unknown(fp, turn)
        p = Proposal(call, turn, arguments, fp, tool, decision)  # no keyword: a class called with one builds a dict
        p.repair, p.canonical = parsed.repair, canonical
        if prepared:
            p.changed = prepared.changed
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
            self._refuse_or_validate(p, parse_error, offered, prepared.refusal if prepared else None, validated)
            if not alone:
                self._share_within_turn(p)
        return p

    def _share_within_turn(self, p: Proposal) -> None:
        """Identical calls in one turn run once (parallel calls cannot wait for each other's
        answer from the cache); the others get its result. Polling tools run every time."""
        if self._batch_turn != p.turn:
            self._batch_turn, self._batch = p.turn, {}
        if p.tool is None or p.tool.repeatable or p.tool.terminal or p.validated is None:
            return
        first = self._batch.setdefault(p.fingerprint, p)
        if first is not p:
            p.shares, p.validated = first, None
            self.duplicates_avoided += 1

    def _refuse_or_validate(
        self,
        p: Proposal,
        parse_error: str | None,
        offered: set[str],
        slot_refusal: ToolResult | None = None,
        validated: BaseModel | ToolResult | None = None,
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
        elif type(validated) is ToolResult:  # validate_arguments' refusal (see check)
            p.refused_by, p.result = "schema", validated
        else:
            assert validated is not None  # validated whenever the tool exists and the JSON parsed
            p.validated = validated


_PLAIN_FIELD_TYPES = frozenset({str, int, bool})
_plain_models: dict[type[BaseModel], bool] = {}


def _dumps_as_is(cls: type[BaseModel]) -> bool:
    """Whether `model_dump(mode="json")` of this class is its fields' values as they are: every
    field a str, int or bool (no float: JSON mode writes inf/nan as null), nothing that changes
    what is dumped (serializers, computed fields, exclusions, extra fields)."""
    found = _plain_models.get(cls)
    if found is None:
        decorators = cls.__pydantic_decorators__
        found = _plain_models[cls] = (
            cls.model_config.get("extra") != "allow"
            and not decorators.field_serializers
            and not decorators.model_serializers
            and not cls.__pydantic_computed_fields__
            and all(
                f.annotation in _PLAIN_FIELD_TYPES and not f.metadata and not f.exclude
                for f in cls.model_fields.values()
            )
        )
    return found


def normalised(validated: BaseModel) -> Any:
    """The arguments as validation made them: every field with its default, coerced values (a
    schema-declared tool's: the object as given, not wrapped in the field that carries it)."""
    cls = type(validated)
    if cls is ArgumentsAsGiven:
        return validated.arguments  # type: ignore[attr-defined]
    if _plain_models.get(cls) or _dumps_as_is(cls):  # (known once per class: its lookup without a call)
        return dict(validated.__dict__)  # what model_dump(mode="json") gives, without it
    if isinstance(validated, ArgumentsAsGiven):
        return validated.arguments
    try:
        return validated.model_dump(mode="json")
    except (ValueError, TypeError):  # a value JSON cannot hold; its Python form still fingerprints
        return validated.model_dump()
