"""Building pydantic models on the hot path from values the runtime itself made.

`trusted(cls, values)` makes the instance validation would make from values of the right types
(field order, defaults, default factories, fields-set) at a fraction of the cost: no value is
checked or coerced, so it is for code that builds from checked parts only (the loop's per-step
events, the replies of the scripted models). A misspelt or missing field still raises at once:
then it validates, which raises pydantic's own `ValidationError` naming the field. Classes it
cannot build faithfully (aliases, validators that change data, extra fields allowed, private
attributes, a mutable default) are always validated.

tests/test_events.py validates every event of real runs again from its JSON and compares.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_IMMUTABLE = (str, int, float, bool, bytes, tuple, frozenset, type(None))
# The four slots every instance has, set through their own descriptors: what `object.__setattr__`
# ends in, without its attribute lookup and argument tuple (about 500 instructions less each).
_slots = BaseModel.__dict__
_set_dict = _slots["__dict__"].__set__
_set_fields_set = _slots["__pydantic_fields_set__"].__set__
_set_extra = _slots["__pydantic_extra__"].__set__
_set_private = _slots["__pydantic_private__"].__set__


_shared: set[int] = set()
"""The ids of the fields-sets `in_order` shares (each held by its plan for good: never reused)."""


def own_fields_set_first(self: BaseModel, name: str, value: Any) -> None:
    """`__setattr__` of a model whose in-order instances may share a fields-set (events): pydantic
    adds the name to the fields-set in place on assignment, so the instance takes its own copy first."""
    if id(self.__pydantic_fields_set__) in _shared:
        _set_fields_set(self, set(self.__pydantic_fields_set__))
    _setattr(self, name, value)


_setattr = BaseModel.__setattr__


class _Plan:
    __slots__ = ("defaults", "factories", "frozen", "names", "order", "required", "shapes", "unset")

    def __init__(
        self,
        names: frozenset[str],
        required: frozenset[str],
        defaults: dict[str, Any],
        factories: tuple[tuple[str, Callable[[], Any]], ...],
        frozen: bool = False,
    ) -> None:
        self.names, self.required, self.defaults, self.factories = names, required, defaults, factories
        self.frozen = frozen
        """A frozen model, or one whose assignment copies a shared fields-set first
        (`own_fields_set_first`): `in_order`'s instances of one `unset` share their fields-set.
        pydantic adds to a fields-set only on assignment and copies it before `model_copy` adds."""
        self.shapes: dict[tuple[str, ...], _Shape] = {}
        """Field names as a call site gives them (in its order) -> what checking them found."""
        self.order = tuple(defaults)
        """Every field name in field order (`in_order`'s values give exactly these)."""
        self.unset: dict[tuple[str, ...], set[str]] = {}
        """`in_order`'s names given as their defaults -> the fields-set of such an instance."""

    def shape(self, names: tuple[str, ...]) -> _Shape | None:
        """The checked shape of these field names; None when one is unknown or a required one missing."""
        found = self.shapes.get(names)
        if found is None:
            given = frozenset(names)
            if not (self.required <= given <= self.names):
                return None
            if len(self.shapes) >= MAX_SHAPES_KEPT:
                self.shapes.clear()
            factories = tuple((name, make) for name, make in self.factories if name not in given)
            found = self.shapes[names] = _Shape(given, factories)
        return found


class _Shape:
    __slots__ = ("factories", "given")

    def __init__(self, given: frozenset[str], factories: tuple[tuple[str, Callable[[], Any]], ...]) -> None:
        self.given, self.factories = given, factories


MAX_SHAPES_KEPT = 64
_new = object.__new__
_plans: dict[type[BaseModel], _Plan | None] = {}


def _plan(cls: type[BaseModel]) -> _Plan | None:
    config = cls.model_config
    if (
        cls.__pydantic_root_model__
        or cls.__pydantic_post_init__
        or cls.__private_attributes__
        or config.get("extra") == "allow"
        or config.get("validate_default")
        or cls.__pydantic_decorators__.model_validators
        or cls.__pydantic_decorators__.field_validators
    ):
        return None
    defaults: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    required: set[str] = set()
    for name, field in cls.model_fields.items():
        if field.alias not in (None, name) or field.validation_alias not in (None, name) or field.validate_default:
            return None
        defaults[name] = None  # a place in field order; every one is filled below or by the values
        if field.is_required():
            required.add(name)
        elif field.default_factory is not None:
            if field.default_factory_takes_validated_data:
                return None
            factories.append((name, field.default_factory))  # type: ignore[arg-type]
        elif isinstance(field.default, _IMMUTABLE):
            defaults[name] = field.default
        else:
            return None
    shares = bool(config.get("frozen")) or cls.__setattr__ is own_fields_set_first
    return _Plan(frozenset(defaults), frozenset(required), defaults, tuple(factories), shares)


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of `cls` from `values` of the right types, unchecked (see the module)."""
    try:
        plan = _plans[cls]
    except KeyError:
        plan = _plans[cls] = _plan(cls)
    if plan is None:
        return cls(**values)
    names = tuple(values)
    if (shape := plan.shapes.get(names) or plan.shape(names)) is None:
        return cls(**values)  # validation: the error names the misspelt or missing field
    data = {**plan.defaults, **values}  # the defaults' keys first: field order
    for name, factory in shape.factories:
        data[name] = factory()
    instance = _new(cls)
    _set_dict(instance, data)
    _set_fields_set(instance, set(shape.given))
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


def in_order(cls: type[M], values: dict[str, Any], unset: tuple[str, ...] = ()) -> M:
    """As `trusted(cls, values)` without the names in `unset`, for `values` that hold every field
    in field order (those in `unset` at their defaults, a default factory's fresh value, as
    validation would fill them in; checked the first time a class sees this `unset`): the dict
    becomes the instance's own, with nothing to merge (the caller must not keep it). Other
    values take the general way (`trusted`), with the same result (a name in `unset` whose
    value is not its default counts as given)."""
    try:
        plan = _plans[cls]
    except KeyError:
        plan = _plans[cls] = _plan(cls)
    if plan is None or tuple(values) != plan.order:
        return trusted(cls, _given(cls, values, unset))
    given = plan.unset.get(unset)
    if given is None:
        if not set(unset) <= plan.names - plan.required or _given(cls, values, unset).keys() & set(unset):
            return trusted(cls, _given(cls, values, unset))
        given = plan.unset[unset] = set(plan.names.difference(unset))
        _shared.add(id(given))
    instance = _new(cls)
    _set_dict(instance, values)
    _set_fields_set(instance, given if plan.frozen else set(given))
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


def _given(cls: type[BaseModel], values: dict[str, Any], unset: tuple[str, ...]) -> dict[str, Any]:
    """`values` less the names in `unset` that hold their field's default."""
    fields = cls.model_fields
    return {
        name: value
        for name, value in values.items()
        if name not in unset
        or name not in fields
        or fields[name].is_required()
        or value != fields[name].get_default(call_default_factory=True)
    }
