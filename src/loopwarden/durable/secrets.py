"""Secrets never reach DBOS's database. A run's configuration is its workflow's input, which DBOS
stores (pickled) so that any process can recover the run; an API key in it would sit in the
database for as long as the workflow's row does. So before a run is enqueued every `SecretStr`
in its configuration is taken out (`withhold`) and replaced by a `SecretRef`: where the secret
can be found again, never the secret itself.

Where a process running the workflow finds it (`restore`), first to last:
1. this process's memory, if this is the process that took the run and it has not restarted
   (the embedded server: a key given with the submission is used as given);
2. the environment variable that held it at submission (`LOOPWARDEN_API_KEY`, a provider's
   `DEEPSEEK_API_KEY`...), read from *this* process's environment;
3. for an endpoint's `api_key`, this process's own endpoint configuration (environment, then
   config file) when it names the same base URL (a key goes only where it was configured for).
Otherwise the run goes on without it and the endpoint's refusal is a `model_failed` event, like
any wrong key. A key given with one submission therefore lasts as long as the process that took
it: after a restart, or on a worker elsewhere, the run uses the key configured there.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from pydantic import BaseModel, SecretStr

KEY_VARIABLES = ("LOOPWARDEN_API_KEY",)
"""Besides each preset's own variable (models/config.py), where an endpoint's key may come from."""


class SecretRef(BaseModel):
    """Where one secret of a run's configuration went: its field path and, if an environment
    variable held it, that variable's name."""

    path: tuple[str, ...]
    env: str | None = None


_held: dict[str, dict[tuple[str, ...], SecretStr]] = {}
_held_lock = threading.Lock()


def withhold(config: Any, run_id: str, *, hold: bool = True) -> tuple[Any, list[SecretRef]]:
    """`config` without its secrets, and where to find them again. With `hold` this process
    keeps them in memory for the run (until `release`)."""
    found: dict[tuple[str, ...], SecretStr] = {}
    stripped = _strip(config, (), found)
    if hold and found:
        with _held_lock:
            _held[run_id] = found
    return stripped, [SecretRef(path=path, env=_variable_holding(secret)) for path, secret in found.items()]


def restore(config: Any, run_id: str, refs: list[SecretRef]) -> Any:
    """`config` with each referenced secret put back from wherever this process can find it."""
    with _held_lock:
        held = dict(_held.get(run_id, {}))
    for ref in refs:
        secret = held.get(ref.path) or _from_environment(ref) or _from_own_endpoint(config, ref)
        if secret is not None:
            config = _put(config, ref.path, secret)
    return config


def release(run_id: str) -> None:
    with _held_lock:
        _held.pop(run_id, None)


def _strip(value: Any, path: tuple[str, ...], found: dict[tuple[str, ...], SecretStr]) -> Any:
    if not isinstance(value, BaseModel):
        return value
    update: dict[str, Any] = {}
    for name in type(value).model_fields:
        field = getattr(value, name)
        if isinstance(field, SecretStr):
            found[(*path, name)] = field
            update[name] = None
        elif isinstance(field, BaseModel):
            stripped = _strip(field, (*path, name), found)
            if stripped is not field:
                update[name] = stripped
    return value.model_copy(update=update) if update else value


def _put(value: Any, path: tuple[str, ...], secret: SecretStr) -> Any:
    if not path or not isinstance(value, BaseModel):
        return value
    head, rest = path[0], path[1:]
    inner = secret if not rest else _put(getattr(value, head), rest, secret)
    return value.model_copy(update={head: inner})


def _candidate_variables() -> list[str]:
    from ..models.config import PRESETS

    return [*KEY_VARIABLES, *sorted({p.key_env for p in PRESETS.values() if p.key_env})]


def _variable_holding(secret: SecretStr) -> str | None:
    value = secret.get_secret_value()
    return next((name for name in _candidate_variables() if value and os.environ.get(name) == value), None)


def _from_environment(ref: SecretRef) -> SecretStr | None:
    value = os.environ.get(ref.env) if ref.env else None
    return SecretStr(value) if value else None


def _from_own_endpoint(config: Any, ref: SecretRef) -> SecretStr | None:
    """This process's configured key, if its configured endpoint is the run's (a key is never sent
    to a base URL it was not configured for)."""
    if ref.path[-1:] != ("api_key",):
        return None
    owner = config
    for name in ref.path[:-1]:
        owner = getattr(owner, name, None)
    base_url = getattr(owner, "base_url", None)
    if not isinstance(base_url, str):
        return None
    from ..models.config import ConfigError, load_endpoint_config

    try:
        own = load_endpoint_config()
    except ConfigError:
        return None
    if own is None or own.base_url.rstrip("/") != base_url.rstrip("/"):
        return None
    return own.api_key
