"""Typed output: `Agent(..., output_type=Answer)`. The model is told the type's JSON Schema;
its answer is validated like a verifier (a reply that does not validate goes back to it with
the errors); the validated value is the run's output (`RunResult.output`), and its JSON is the
output of the `run_finished` event."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from .verify import describe_errors, extract_json


class Sentinel:
    """A marker compared by identity that stays itself when a result holding it is pickled or
    copied (pickled by its name in this module: a bare `object()` came back as another object,
    so a copied `RunResult.output` took the marker for a value)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<{self.name}>"


UNSET: Any = Sentinel("UNSET")
"""No valid output yet."""
NOT_TYPED: Any = Sentinel("NOT_TYPED")
"""The agent has no `output_type`: the run's output is its raw output."""


class OutputSpec:
    """The declared output type of one run, and the value once an answer validated."""

    def __init__(self, output_type: Any) -> None:
        self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        self.name = getattr(output_type, "__name__", str(output_type))
        self.value: Any = UNSET

    @classmethod
    def of(cls, output_type: Any) -> OutputSpec | None:
        """None for no type or `str`: then the answer text is the output."""
        return None if output_type is None or output_type is str else cls(output_type)

    def instruction(self) -> str:
        schema = json.dumps(self.adapter.json_schema(), separators=(",", ":"))
        return (
            f"When you give your final answer, answer with only a JSON value of type {self.name} "
            f"matching this JSON Schema, no prose around it: {schema}"
        )

    def verify(self, text: str) -> str | None:
        """A verifier: None (and the value kept) when the text is valid JSON of the type."""
        try:
            self.value = self.adapter.validate_json(extract_json(text))
        except ValidationError as error:
            return f"the answer must be JSON matching {self.name}: " + describe_errors(error)
        return None

    def accept(self, data: Any) -> bool:
        """A terminal tool's output, validated as the run's output."""
        try:
            self.value = self.adapter.validate_python(data)
        except ValidationError:
            return False
        return True

    def dump(self) -> Any:
        return self.adapter.dump_python(self.value, mode="json")
