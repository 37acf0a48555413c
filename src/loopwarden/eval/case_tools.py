"""Tools of an eval case: real `Tool`s whose bodies answer from the case's canned results, by
argument match, or from a small Python script. Built fresh for every run (call counters are
per run, so cases can run concurrently)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, model_validator

from ..state import ChecklistItem
from ..tools import Tool, ToolResult
from .case import CannedResult, ChecklistSpec, ToolSpec

ANY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


@dataclass(frozen=True)
class CaseTool(Tool):
    """A tool whose schema is given as JSON Schema and whose function takes the argument dict."""

    schema: dict[str, Any] = field(default_factory=lambda: dict(ANY_OBJECT))

    @property
    def parameters(self) -> dict[str, Any]:
        return self.schema

    async def call(self, arguments: BaseModel) -> Any:
        return await self.fn(arguments.model_dump())


def _args_model(schema: dict[str, Any]) -> type[BaseModel]:
    validator = Draft202012Validator(schema)

    class CaseArgs(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _matches_schema(cls, data: Any) -> Any:
            errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
            if errors:
                raise ValueError("; ".join(_describe(e.path, e.message) for e in errors[:3]))
            return data

    return CaseArgs


def _describe(path: Any, message: str) -> str:
    where = ".".join(str(p) for p in path)
    return f"{where}: {message}" if where else message


def contains(args: Any, wanted: dict[str, Any]) -> bool:
    """Whether the arguments hold every key of `wanted` with an equal value."""
    return isinstance(args, dict) and all(k in args and args[k] == v for k, v in wanted.items())


def _canned(result: CannedResult, raw: bool = True) -> Any:
    if result.ok:
        # raw, the tool's business-failure parser sees failures-as-data; else it is plain data
        return result.data if raw else ToolResult.success(result.data)
    return ToolResult.failure(
        result.error_type or "error", result.message or result.error_type or "error", retryable=result.retryable
    )


def _pick(results: list[CannedResult], n: int) -> CannedResult | None:
    return results[min(n, len(results)) - 1] if results else None


def _load_script(spec: ToolSpec) -> Callable[[dict[str, Any], int], Any]:
    namespace: dict[str, Any] = {}
    exec(compile(spec.script or "", f"<tool {spec.name} script>", "exec"), namespace)
    run = namespace.get("run")
    if not callable(run):
        raise ValueError(f"tool {spec.name}: its script must define run(args, n)")
    return run  # type: ignore[no-any-return]


def _body(spec: ToolSpec) -> Callable[[dict[str, Any]], Any]:
    script = _load_script(spec) if spec.script else None
    counts: Counter[int] = Counter()  # calls per by_args entry (-1: the tool as a whole)

    async def body(args: dict[str, Any]) -> Any:
        counts[-1] += 1
        if script is not None:
            value = await asyncio.to_thread(script, args, counts[-1])  # a slow script never blocks the loop
            return value if spec.raw or isinstance(value, ToolResult) else ToolResult.success(value)
        for index, entry in enumerate(spec.by_args):
            if contains(args, entry.args):
                counts[index] += 1
                chosen = _pick(entry.results, counts[index]) or entry.result
                return _canned(chosen, spec.raw) if chosen is not None else "ok"
        chosen = _pick(spec.results, counts[-1])
        return _canned(chosen, spec.raw) if chosen is not None else "ok"

    return body


def build_tool(spec: ToolSpec) -> CaseTool:
    schema = spec.parameters or dict(ANY_OBJECT)
    return CaseTool(
        name=spec.name,
        description=spec.description or spec.name,
        fn=_body(spec),
        args_model=_args_model(schema),
        terminal=spec.terminal,
        repeatable=spec.repeatable,
        side_effect=spec.side_effect,
        is_async=True,
        schema=schema,
    )


def build_checklist(specs: list[ChecklistSpec]) -> list[ChecklistItem]:
    def when(wanted: dict[str, Any]) -> Callable[[Any, ToolResult], bool] | None:
        if not wanted:
            return None
        return lambda args, _result: contains(args, wanted)

    return [ChecklistItem(s.name, s.tool, when(s.when_args), s.required) for s in specs]
