"""A commit's events as the lines of its batch row: each event's JSON, the bytes of
`Event.to_json()`, whether the run told the event built or kept it (hotpath/kept.py).

A traced `Agent.run` (nobody reads its events before the result) keeps the loop's per-step events
as an untraced one does, as what makes their dicts (a call's three events as one item), and the
recorder commits them from there: each dict is made at the commit, written by a serializer made
once per class from the class's own fields' schemas (a typed dict of the same fields, so every
value goes through the very serializer the model's field has) and dropped; the event is built
(its dict made again) only if `result.events` is read. Writing the dict is what writing the event
cost; building the instance (and handing it up through the run's generators) is what is saved,
and so is keeping the dicts while the run goes (objects the collector walks).
tests/test_trace_kept.py compares the lines with `to_json()` of the built events, byte for byte,
and tests/test_trace_lines.py each kept form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_core import SchemaSerializer, core_schema

from ..events import Event
from ..hotpath.kept import Kept, Told, kept_values
from ..hotpath.trusted import in_order

_TO_JSON, _MODEL_DUMP_JSON = Event.to_json, BaseModel.model_dump_json
_WRITERS: dict[type, Any] = {}
"""Per event class: its serializer's `to_json` when the class writes the JSON `Event.to_json`
writes (the serializer's own bytes), else None. Read per event, these were three attribute reads
through pydantic's `__getattr__` hooks (two of them the class's, through its metaclass's):
~2,600 instructions an event (callgrind, a run's 403 events: 18,800 -> 16,200 each)."""
_DICT_WRITERS: dict[type, tuple[Any, int] | None] = {}
"""Per event class: a serializer's `to_json` for a kept dict of its fields and their count, or
None when only the built event writes its bytes (a class that writes its own JSON, a model or
field serializer that is given the instance, computed fields)."""
MAX_CLASSES = 256
"""Event classes made at run time: each table keeps at most this many."""


def _writer_of(cls: type) -> Any:
    if len(_WRITERS) >= MAX_CLASSES:
        _WRITERS.clear()
    default = getattr(cls, "to_json", None) is _TO_JSON and getattr(cls, "model_dump_json", None) is _MODEL_DUMP_JSON
    write = _WRITERS[cls] = cls.__pydantic_serializer__.to_json if default else None  # type: ignore[attr-defined]
    return write


def _dict_writer_of(cls: type) -> tuple[Any, int] | None:
    if len(_DICT_WRITERS) >= MAX_CLASSES:
        _DICT_WRITERS.clear()
    found = _DICT_WRITERS[cls] = _dict_writer(cls) if _writer_of(cls) is not None else None
    return found


def _dict_writer(cls: type) -> tuple[Any, int] | None:
    """The class's fields as a typed dict's, each with the model field's own schema (its
    serializer, alias, exclusion), under the model's config: the JSON its serializer writes for
    an instance whose `__dict__` is the dict. None where that would not hold."""
    schema = cls.__pydantic_core_schema__  # type: ignore[attr-defined]
    definitions = None
    if schema["type"] == "definitions":
        schema, definitions = schema["schema"], schema["definitions"]
    if schema["type"] != "model" or "serialization" in schema or schema.get("root_model"):
        return None  # a reference to resolve, a model serializer of its own (given the instance)
    inner, config = schema["schema"], schema.get("config") or {}
    if (
        inner["type"] != "model-fields"
        or inner.get("computed_fields")
        or "allow" in (config.get("extra_fields_behavior"), inner.get("extra_behavior"))
    ):
        return None  # a property's value, or extra fields (not in `__dict__`) to write too
    fields: dict[str, Any] = {}
    for name, field in inner["fields"].items():
        if field["type"] != "model-field" or not field.keys() <= _FIELD_KEYS or _given_the_instance(field["schema"]):
            return None  # a setting a typed dict's field does not take (a newer pydantic's): the event writes it
        fields[name] = {
            **{key: value for key, value in field.items() if key not in ("type", "frozen")},
            "type": "typed-dict-field",
            "required": True,
        }
    typed: Any = core_schema.typed_dict_schema(fields, config=config or None)  # type: ignore[arg-type]
    if definitions is not None:
        typed = core_schema.definitions_schema(typed, definitions)
    return SchemaSerializer(typed).to_json, len(fields)


_FIELD_KEYS = {
    "type", "schema", "validation_alias", "serialization_alias", "serialization_exclude", "serialization_exclude_if",
    "frozen", "metadata",
}  # fmt: skip
"""What a model field's schema may hold for `_dict_writer` (all a typed dict's field takes too, and
`frozen`, which serialising does not read); SchemaSerializer ignores keys it does not know."""


def _given_the_instance(schema: Any) -> bool:
    """Whether a field's schema holds a field serializer (`@field_serializer`: given the
    instance, which a dict is not); nested models are their own instances and are not looked into."""
    if isinstance(schema, dict):
        if schema.get("type") == "model":
            return False
        if schema.get("is_field_serializer"):
            return True
        return any(_given_the_instance(value) for value in schema.values())
    if isinstance(schema, list | tuple):
        return any(_given_the_instance(value) for value in schema)
    return False


def _built_json(cls: type[Event], values: dict[str, Any], unset: tuple[str, ...]) -> str:
    """A kept event's `to_json()` where its dict is not written as it is (a class that writes its
    own JSON, a dict without every field): the event built on a copy of its dict."""
    return in_order(cls, dict(values), unset).to_json()


def _kept_line(kept: Kept) -> bytes | str:
    """A kept event's `to_json()`: its bytes when written from its dict, else the event's str.
    The dict's order is the JSON's, as an instance's `__dict__`'s is: `record`'s dicts hold
    every field in field order (in_order's contract; tests/test_trace_kept.py compares)."""
    cls, values, unset = kept
    found = _DICT_WRITERS[cls] if cls in _DICT_WRITERS else _dict_writer_of(cls)
    if found is not None and len(values) == found[1]:
        return found[0](values)  # type: ignore[no-any-return]
    return _built_json(cls, values, unset)


def head_of(item: Told) -> tuple[str, int]:
    """The run id and number of the event `item` is (its first, a kept item that stands for several)."""
    if type(item) is tuple:
        made = item[1]
        if type(made) is dict:  # (class, dict, unset)
            return made["run_id"], made["seq"]
        if isinstance(item[0], type):  # (class, make, type, run_id, seq, ts, *made_from)
            return item[3], item[4]
        return item[2], item[3]  # (make, how many, run_id, first seq, *made_from)
    return item.run_id, item.seq  # type: ignore[union-attr]


def numbered(items: Sequence[Told], run_id: str, first: int) -> list[Told]:
    """`items` numbered from `first` under `run_id`: those numbered otherwise (another writer of
    the run, a stamper that started elsewhere) as copies, for the store only (a kept item that
    stands for several events numbers them from its first)."""
    out: list[Told] = []
    seq = first
    for item in items:
        if type(item) is tuple:
            kind, made = item[0], item[1]
            if type(made) is dict:  # (class, dict, unset)
                if made["seq"] != seq or made["run_id"] != run_id:
                    item = (kind, {**made, "seq": seq, "run_id": run_id}, item[2])
                seq += 1
            elif isinstance(kind, type):  # (class, make, type, run_id, seq, ts, *made_from)
                if item[4] != seq or item[3] != run_id:
                    item = (*item[:3], run_id, seq, *item[5:])
                seq += 1
            else:  # (make, how many, run_id, first seq, *made_from)
                if item[3] != seq or item[2] != run_id:
                    item = (kind, made, run_id, seq, *item[4:])
                seq += made
        else:
            event: Event = item  # type: ignore[assignment]
            if event.seq != seq or event.run_id != run_id:
                item = event.model_copy(update={"seq": seq, "run_id": run_id})
            seq += 1
        out.append(item)
    return out


def flat(items: Sequence[Told]) -> list[Told]:
    """`items` with each kept item as the `Kept` of each event it stands for (its dicts made)."""
    out: list[Told] = []
    for item in items:
        if type(item) is tuple:
            out += kept_values(item)
        else:
            out.append(item)
    return out


def event_row(item: Told) -> tuple[int, str, float, str]:
    """An event's number, type, time and JSON: its row of `events` (a kept item of one event)."""
    if type(item) is tuple:
        (kept,) = kept_values(item)
        values, line = kept[1], _kept_line(kept)
        return values["seq"], values["type"], values["ts"], line if isinstance(line, str) else line.decode()
    event: Event = item  # type: ignore[assignment]
    return event.seq, event.type, event.ts, event.to_json()


def event_parts(events: Sequence[Told]) -> list[bytes] | None:
    """Each event's JSON (`to_json()`) as bytes, or None if one's JSON has a line break in it (a
    subclass that writes its own). What pydantic's serializer writes never has one (it escapes
    every control character), so those events' bytes are taken as they come and nothing is
    searched for line breaks: a str per event and a count of the batch's line breaks were ~2 M
    instructions of a traced 100-call run (bench_trace.py). A kept event is written from its
    dict (`_kept_line`, written out here: a call an event less), made now from what it was kept
    as (hotpath/kept.py) and dropped once written: the event is built from it again if read."""
    parts: list[bytes] = []
    writers, dict_writers = _WRITERS, _DICT_WRITERS
    for item in events:
        cls = type(item)
        line: bytes | str
        if cls is tuple:
            kind, made = item[0], item[1]  # type: ignore[index]
            if type(made) is dict:
                many: Any = (item,)
            elif isinstance(kind, type):  # (class, make, type, run_id, seq, ts, *made_from): the head is [2:6]
                made, unset = made(item[2:6], *item[6:])  # type: ignore[index]
                many = ((kind, made, unset),)
            else:  # (make, how many, *made_from): each one's (class, dict, unset)
                many = kind(*item[2:])  # type: ignore[index]
            for kind, values, unset in many:
                found = dict_writers[kind] if kind in dict_writers else _dict_writer_of(kind)
                if found is not None and len(values) == found[1]:
                    parts.append(found[0](values))
                    continue
                line = _built_json(kind, values, unset)
                if "\n" in line:
                    return None
                parts.append(line.encode())
            continue
        write = writers[cls] if cls in writers else _writer_of(cls)
        if write is not None:
            parts.append(write(item))  # what to_json() decodes
            continue
        line = item.to_json()  # type: ignore[union-attr]
        if "\n" in line:
            return None
        parts.append(line.encode())
    return parts


def event_lines(events: Sequence[Told]) -> str | None:
    """The events' JSON, one a line (`event_parts` joined and decoded once), or None."""
    parts = event_parts(events)
    return None if parts is None else b"\n".join(parts).decode()
