"""A model's JSON for the run store by orjson, where it is installed: the bytes pydantic's
serializer writes (`model_dump_json()`, `Event.to_json()`), in fewer instructions. Used for a
traced run's events; not for its models' replies, whose tool calls and usage are models in
fields, each a Python call here (`_nested`): a traced run whose replies went through it too took
more instructions than with pydantic writing them.

Why: a traced run stores every event as JSON before it is streamed, and pydantic's serializer
was ~16,500 instructions an event of 250-650 bytes, the largest part of what tracing adds to a
run (bench/README.md, tracing). Through here, `rows.event_lines` on a run's 403 events took
6.3 M instructions against 7.6 M, and the traced run 115.56 M against 117.27 M (callgrind).
orjson is not a dependency of loopwarden (it comes with LangChain's and others' clients):
without it every event goes through pydantic, as before.

Only where both write the same bytes: a class whose JSON nothing but its fields' values decides
(`shape`: no serializer of its own, no aliases, excluded or computed fields, field metadata,
extra fields, root model; config only `extra` and `frozen`), its instance's `__dict__` holding
its fields in their order, every float field holding a float (pydantic writes an int there as
1.0, orjson as 1). Anything orjson would write its own way (datetimes, dataclasses, subclasses
of str, int, dict or list, models that are not plain, ints over 64 bits, strings that are not
UTF-8) makes `model_json` return None, and pydantic writes that model (and raises where it
raised). A non-finite float is null from both. Models in fields (a call's usage, a run's
totals, a call's notes) are written the same way, by `_nested`, if their class derives
from BaseModel directly."""

from __future__ import annotations

import importlib
import types
import typing
from typing import Any

from pydantic import BaseModel, RootModel

orjson: Any  # by name, so that type checking passes where it is not installed
try:
    orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

_CONFIG = frozenset({"extra", "frozen"})
_OPTIONS = (
    0
    if orjson is None
    else orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)

Shape = tuple[tuple[str, ...], tuple[str, ...]]
"""A plain class's field names in order, and those declared float (or float | None)."""

_shapes: dict[type, Shape | None] = {}


def shape(cls: type) -> Shape | None:
    """The shape of model class `cls` if it is plain (see the module), else None; made once."""
    try:
        return _shapes[cls]
    except KeyError:
        pass
    made = _shape(cls)
    _shapes[cls] = made
    return made


def _shape(cls: type) -> Shape | None:
    if not isinstance(cls, type) or not issubclass(cls, BaseModel) or issubclass(cls, RootModel):
        return None
    config = {key for key, value in cls.model_config.items() if value is not None}
    decorators = cls.__pydantic_decorators__
    if (
        not config <= _CONFIG
        or cls.model_config.get("extra") == "allow"
        or cls.__pydantic_computed_fields__
        or decorators.field_serializers
        or decorators.model_serializers
        or cls.model_dump_json is not BaseModel.model_dump_json
        or getattr(cls, "to_json", None) not in (None, _event_to_json())
    ):
        return None
    floats = []
    for name, field in cls.model_fields.items():
        if field.exclude or field.alias is not None or field.serialization_alias is not None or field.metadata:
            return None
        if _is_float(field.annotation):
            floats.append(name)
    return tuple(cls.model_fields), tuple(floats)


def _event_to_json() -> Any:
    from ..events import Event

    return Event.to_json


def _is_float(annotation: Any) -> bool:
    if annotation is float:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_float(a) for a in typing.get_args(annotation))
    return False


def _fits(model: BaseModel, found: Shape) -> dict[str, Any] | None:
    """The model's `__dict__` if orjson writes it as pydantic writes the model."""
    values = model.__dict__
    names, floats = found
    if model.__pydantic_extra__ or tuple(values) != names:
        return None
    for name in floats:
        value = values[name]
        if type(value) is not float and value is not None:
            return None
    return values


def _nested(value: Any) -> Any:
    """orjson's `default`: a plain model's fields; anything else is not written here. Only a
    model whose class derives from BaseModel alone: pydantic writes a subclass's instance in a
    field declared as its base with the base's fields only, which `__dict__` does not say."""
    cls = type(value)
    found = shape(cls) if cls.__bases__ == (BaseModel,) else None
    values = None if found is None else _fits(value, found)
    if values is None:
        raise TypeError
    return values


def model_json(model: BaseModel) -> bytes | None:
    """The model's JSON as `model_dump_json()` writes it (UTF-8), or None where pydantic must."""
    if orjson is None:
        return None
    found = shape(type(model))
    if found is None:
        return None
    values = _fits(model, found)
    if values is None:
        return None
    try:
        data: bytes = orjson.dumps(values, default=_nested, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: something it does not write as pydantic does
        return None
    return data
