"""Tools declared by a JSON Schema instead of a typed Python function: the tools an MCP server
lists, or the tools a proxied client sends in its request. The schema is kept exactly as given
(it is what the model is shown) and arguments are checked against it with `jsonschema`."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema
from pydantic import model_validator

from . import ArgumentsAsGiven, ResultParser, SideEffect, Tool, business_failure


class SchemaArguments(ArgumentsAsGiven):
    """Arguments of a schema-declared tool: the object the schema accepted, kept as given in
    `arguments` (the one field, so the executor hands it to the tool as one value)."""


_MODELS: dict[str, type[SchemaArguments]] = {}
_MODELS_KEPT = 512


def _arguments_model(name: str, parameters: dict[str, Any]) -> type[SchemaArguments]:
    """One model class per distinct schema: building a class and checking a schema cost
    milliseconds, and the same tools come back on every request of a proxied conversation."""
    key = name + "\0" + json.dumps(parameters, sort_keys=True, default=str)
    model = _MODELS.get(key)
    if model is None:
        if len(_MODELS) >= _MODELS_KEPT:
            _MODELS.pop(next(iter(_MODELS)))
        model = _MODELS[key] = _build_arguments_model(name, parameters)
    return model


def _build_arguments_model(name: str, parameters: dict[str, Any]) -> type[SchemaArguments]:
    schema = dict(parameters) if parameters else {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    validator: jsonschema.protocols.Validator | None
    try:
        kind = jsonschema.validators.validator_for(schema)
        kind.check_schema(schema)
        validator = kind(schema)
    except jsonschema.SchemaError:
        validator = None  # a broken schema from a server still lets the model call the tool

    class Arguments(SchemaArguments):
        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            if not isinstance(data, dict):
                raise ValueError("arguments must be a JSON object")
            if validator is not None:
                problem = jsonschema.exceptions.best_match(validator.iter_errors(data))
                if problem is not None:
                    where = "/".join(str(p) for p in problem.absolute_path) or "arguments"
                    raise ValueError(f"{where}: {problem.message}")
            return {"arguments": data}

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return dict(schema)

    Arguments.__name__ = "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name)) + "Args"
    return Arguments


def tool_from_schema(
    name: str,
    parameters: dict[str, Any] | None,
    fn: Callable[..., Any],
    *,
    description: str = "",
    namespace: str | None = None,
    terminal: bool = False,
    repeatable: bool = False,
    side_effect: SideEffect = "read",
    idempotent: bool = False,
    result_parser: ResultParser | None = business_failure,
    timeout: float | None = None,
    requires_approval: bool = False,
) -> Tool:
    """A tool whose arguments are described by `parameters` (a JSON Schema object). `fn` is
    called with the arguments as keyword arguments, sync or async."""
    call: Callable[..., Any]
    if inspect.iscoroutinefunction(fn):

        async def call(arguments: dict[str, Any]) -> Any:
            return await fn(**arguments)

    else:

        def call(arguments: dict[str, Any]) -> Any:
            return fn(**arguments)

    return Tool(
        name=name,
        description=description or name,
        fn=call,
        args_model=_arguments_model(name, parameters or {}),
        namespace=namespace,
        terminal=terminal,
        repeatable=repeatable,
        side_effect=side_effect,
        idempotent=idempotent,
        result_parser=result_parser,
        timeout=timeout,
        requires_approval=requires_approval,
        is_async=inspect.iscoroutinefunction(fn),
    )
