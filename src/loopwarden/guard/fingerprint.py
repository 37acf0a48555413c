"""Call fingerprints: tool name + canonical JSON of the full arguments.

Canonical means sorted keys at every depth, no insignificant whitespace and one spelling per
number (0.0 is 0), so argument order never makes two calls look different, while any
difference in value (an `offset`, a page number) always does. It never raises. The loop
fingerprints arguments after schema validation (proposals.py), so defaults and coercions are
already applied.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ..hotpath.fastjson import encoder, string_encoder


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        if value.is_integer() and abs(value) < 2**53:
            return int(value)  # 0.0 and 0 are one JSON number
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=repr)
    return f"<{type(value).__qualname__}:{value!r}>"


_PLAIN = frozenset({str, int, bool, type(None)})
"""Value types JSON spells one way already: a flat object of these needs no rewriting."""
# circular values raise RecursionError, which canonical_json catches
_encode = encoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), check_circular=False)
_string = string_encoder(ensure_ascii=False)


def _flat(arguments: dict[Any, Any]) -> bool:
    """Every key a str, every value of a `_PLAIN` type."""
    for key, value in arguments.items():  # noqa: SIM110  # a loop, not all() of a generator (a frame less)
        if type(key) is not str or type(value) not in _PLAIN:
            return False
    return True


def canonical_json(arguments: Any) -> str:
    """Canonical JSON of arguments; unserialisable values fall back to a stable repr."""
    try:
        if type(arguments) is dict:
            if len(arguments) == 1:  # the commonest call: one string argument, written as _encode writes it
                for key, value in arguments.items():
                    if type(key) is str and type(value) is str:
                        return f"{{{_string(key)}:{_string(value)}}}"
            if _flat(arguments):
                return _encode(arguments)  # the common call: a flat object of strings and integers
        return _encode(_canonical(arguments))
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(arguments))


def fingerprint(tool_name: str, arguments: Any) -> str:
    """The identity of a call: the same tool with the same arguments, at any key order."""
    return f"{tool_name}:{canonical_json(arguments)}"


def args_hash(arguments: Any) -> str:
    """A short stable hash of the arguments, for events and traces."""
    return hash_of_canonical(canonical_json(arguments))


def hash_of_canonical(canonical: str) -> str:
    """`args_hash` of arguments whose canonical JSON is already known (a fingerprint's tail)."""
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]
