"""A cheaper `__init__` for the frozen dataclasses the loop builds every step or every run.

A frozen dataclass's generated `__init__` sets each field with `object.__setattr__(self, name,
value)`: an attribute lookup, an argument tuple and a type lookup of the name per field, about
1,500 instructions each (a four-field record costs 7,600, a plain one 2,500). `quick_init`
gives the class an `__init__` with the same signature that sets each field through its slot's
own descriptor (slotted classes) or gives the instance its dict whole, one dict literal (others):
the same instance, at about 60% of the cost. (Not the dict that reading `self.__dict__` makes, filled
in: that one keeps its keys in the class's shared table and its values apart, which CPython 3.11's
specialised attribute read, `LOAD_ATTR_WITH_HINT`, does not read; every later read of a field, as
the loop's of a `Tool`, `LoopConfig`, `Budgets` or `Ladder` each step, then went the generic way,
about 300 instructions instead of 30.) The class stays frozen (assignment still raises), and equality, hash and
repr are the dataclass's own. tests/test_frozen.py compares instances with those the
generated `__init__` makes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


_FACTORY: Any = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", object())
"""The generated `__init__`'s default for a field with a default factory (shown as `<factory>`)."""


def quick_init(cls: type[T]) -> type[T]:
    """Give a frozen dataclass (no `__post_init__`; a field left out of `__init__` only with a
    default factory) an `__init__` that does not call `object.__setattr__` per field; apply
    above `@dataclass`. Default factories and keyword-only fields are as the generated one has them."""
    params = getattr(cls, "__dataclass_params__", None)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if (
        params is None
        or not params.frozen
        or hasattr(cls, "__post_init__")
        or any(not f.init and f.default_factory is dataclasses.MISSING for f in fields)
    ):
        raise TypeError(f"quick_init needs a frozen dataclass with plain fields: {cls.__name__}")
    slotted = "__slots__" in cls.__dict__
    scope: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    positional, keywords, body = ["self"], list[str](), list[str]()
    for i, f in enumerate(fields):
        value = f.name
        if f.default_factory is not dataclasses.MISSING:
            scope[f"_factory{i}"] = f.default_factory
            value = f"_factory{i}() if {f.name} is _FACTORY else {f.name}" if f.init else f"_factory{i}()"
            default = "=_FACTORY"
        elif f.default is not dataclasses.MISSING:
            scope[f"_default{i}"] = f.default
            default = f"=_default{i}"
        else:
            default = ""
        if f.init:
            (keywords if f.kw_only else positional).append(f"{f.name}{default}")
        if slotted:
            scope[f"_set{i}"] = cls.__dict__[f.name].__set__
            body.append(f"    _set{i}(self, {value})")
        else:
            body.append(f"        {f.name!r}: {value},")
    signature = positional + (["*", *keywords] if keywords else [])
    head = [f"def __init__({', '.join(signature)}):"]
    if not slotted:
        body = ["    _set(self, '__dict__', {", *body, "    })"]  # one call, not one per field
    exec("\n".join(head + body), scope)  # built from the class's own field names
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    generated = cls.__dict__["__init__"]
    init.__doc__, init.__annotations__ = generated.__doc__, dict(generated.__annotations__)
    setattr(cls, "__init__", init)  # noqa: B010  # a class's method replaced on purpose
    return cls
