"""From a typed function to what a tool needs of it: the argument model, the description and each
argument's help (its docstring), and the arguments' JSON Schema.

Each is built once per function shape and shared: a program that declares its tools afresh for
every run (closures over the run's data, as the benchmarks do) gets the model pydantic built the
first time instead of building it again (about 0.5 ms a tool), and the schema with it. The shape
is everything the model is made from: the code object (parameter names and kinds), the name, the
docstring, the defaults and the annotations (with the module they are resolved in). Functions
whose shape cannot be told from these (a `functools.wraps` wrapper, a `__signature__` of its own,
a default that is not a plain scalar, an unhashable annotation) are built every time.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from functools import lru_cache
from typing import Any, get_origin, get_type_hints
from weakref import WeakKeyDictionary

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..context import RunContext
from ..errors import ToolDefinitionError

MAX_SHAPES_KEPT = 1024

_SCALAR_DEFAULTS = (str, int, float, bool, bytes, type(None))

_models: dict[tuple[Any, ...], tuple[type[BaseModel], str | None]] = {}
_schemas: WeakKeyDictionary[type[BaseModel], dict[str, Any]] = WeakKeyDictionary()


@lru_cache(maxsize=MAX_SHAPES_KEPT)
def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (everything but the parameter section) and each argument's help, its
    continuation lines included; Google, NumPy, reST and Epydoc styles (docstring_parser).
    Shared between calls: treat the help mapping as read-only."""
    if not doc:
        return "", {}
    import docstring_parser

    parsed = docstring_parser.parse(doc)
    description = "\n\n".join(p for p in (parsed.short_description, parsed.long_description) if p)
    arg_help = {p.arg_name: " ".join(p.description.split()) for p in parsed.params if p.description}
    return description.strip(), arg_help


def is_context(annotation: Any) -> bool:
    return annotation is RunContext or get_origin(annotation) is RunContext


def _shape(fn: Callable[..., Any], name: str) -> tuple[Any, ...] | None:
    """What the argument model of `fn` is made from, as a key; None when that cannot be told."""
    if type(fn) is not types.FunctionType or hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        return None
    defaults = (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values())
    if not all(type(d) in _SCALAR_DEFAULTS for d in defaults):
        return None  # 0 == False == 0.0: the type is part of the key, so only plain scalars
    key = (
        fn.__code__,
        name,
        fn.__doc__,
        tuple(fn.__kwdefaults__ or ()),
        tuple((type(d), repr(d) if type(d) is float else d) for d in defaults),  # -0.0 == 0.0
        tuple(fn.__annotations__.items()),
        id(fn.__globals__),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


def args_model(fn: Callable[..., Any], name: str, arg_help: dict[str, str]) -> tuple[type[BaseModel], str | None]:
    """The model of the arguments the model gives, and the parameter that takes the RunContext;
    built once per function shape (see the module)."""
    key = _shape(fn, name)
    if key is None:
        return _build(fn, name, arg_help)
    found = _models.get(key)
    if found is None:
        if len(_models) >= MAX_SHAPES_KEPT:
            _models.clear()
        found = _models[key] = _build(fn, name, arg_help)
    return found


def _build(fn: Callable[..., Any], name: str, arg_help: dict[str, str]) -> tuple[type[BaseModel], str | None]:
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_arg: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {name!r}: *args/**kwargs cannot be described to a model")
        annotation = hints.get(param.name, Any)
        if is_context(annotation):
            if context_arg is not None:
                raise ToolDefinitionError(f"tool {name!r}: more than one RunContext parameter")
            context_arg = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        help_text = arg_help.get(param.name)
        fields[param.name] = (annotation, Field(default, description=help_text))
    model_name = "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name)) + "Args"
    model: type[BaseModel] = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    return model, context_arg


def arguments_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of an argument model, titles left out; computed once per model class and
    shared: treat it as read-only."""
    found = _schemas.get(model)
    if found is None:
        found = model.model_json_schema()
        found.pop("title", None)
        for prop in found.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        _schemas[model] = found
    return found
