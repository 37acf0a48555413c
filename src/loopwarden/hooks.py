"""Run hooks: how an integration (durable execution, durable/) adapts a run as it is built,
without the loop knowing about it. Unset, a run pays one context-variable read when it starts
and nothing per step. `adapt_model` does the same for code that calls a model outside a run's
loop (the report's writing stages, an image reader's vision model)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .loop import Run
    from .models.base import Model

RunHook = Callable[["Run"], None]

run_hook: ContextVar[RunHook | None] = ContextVar("loopwarden_run_hook", default=None)
"""Called with each `Run` at the end of its construction, in the context that builds it."""

model_hook: ContextVar[Callable[[Model], Model] | None] = ContextVar("loopwarden_model_hook", default=None)
"""Adapts a model that is called outside a run's loop (durable/: its calls become steps)."""


def adapt_model(model: Model) -> Model:
    """`model` as the current integration wants it called (itself when none is active)."""
    hook = model_hook.get()
    return model if hook is None else hook(model)


idempotency_key_var: ContextVar[str | None] = ContextVar("loopwarden_idempotency_key", default=None)


def idempotency_key() -> str | None:
    """Inside a tool running in a durable run: `<run id>:<step id>`, the same string on every
    execution of that call, including the one after a crash (durable/steps.py). None otherwise."""
    return idempotency_key_var.get()
