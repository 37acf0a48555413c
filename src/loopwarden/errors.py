"""Every error loopwarden raises on purpose derives from one base, `LoopwardenError`.

Trouble inside a run is not raised: a tool that fails, a model that sends malformed calls, a
loop the guard stops all become results and events, and the run ends with a status. What is
raised is a mistake in how the runtime is set up or called, or a model that cannot be reached
after the client's own retries when no run is there to report it.

    LoopwardenError
     ├── ConfigError (ValueError)           settings that cannot work: endpoint, detectors,
     │    │                                 intents, trace target
     │    └── ToolDefinitionError           a function that cannot be a tool; a name twice
     ├── ModelError                         a model call failed after the client's retries
     ├── OutputValidationError (ValueError) a run's answer never matched its `output_type`
     ├── TraceFormatError (ValueError)      a line of a trace file that is not an event
     ├── RunNotFound (KeyError)             no run with that id in the store
     └── CaseError (ValueError)             an eval case file that cannot be read

The report agent and the server derive their own errors from `LoopwardenError` too
(`ReportInputError`, `TemplateError`, `UploadRejected`, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models.base import ClientNote, Usage


class LoopwardenError(Exception):
    """The base of every error loopwarden raises on purpose."""


class ConfigError(LoopwardenError, ValueError):
    """The configuration given cannot work; the message says what to fix."""


class ToolDefinitionError(ConfigError):
    """A function that cannot be described to a model as a tool, or a tool name registered twice."""


class ModelError(LoopwardenError):
    """A model call that failed after the client's own retries; `kind` says how."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        notes: list[ClientNote] | None = None,
        attempts: int = 0,
        usage: Usage | None = None,
        field: str | None = None,
    ):
        from .models.base import Usage  # the models import this module: no cycle at import time

        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retryable = retryable
        self.status = status
        self.notes = notes or []
        self.attempts = attempts
        """Requests that reached the server before the call failed (counted and priced)."""
        self.usage = usage or Usage()
        self.field = field
        """The request field the server named as invalid (kind `invalid_request`)."""

    def event_fields(self) -> dict[str, Any]:
        """The fields of the `model_failed` event that tells this failure."""
        return {
            "kind": self.kind,
            "message": self.message,
            "retryable": self.retryable,
            "status": self.status,
            "notes": self.notes,
            "attempts": self.attempts,
        }


class OutputValidationError(LoopwardenError, ValueError):
    """A run's final answer never validated against the agent's `output_type`."""


class TraceFormatError(LoopwardenError, ValueError):
    """A line of a trace file that is not an event; names the file and line."""


class RunNotFound(LoopwardenError, KeyError):
    """No run with that id in the run store."""


class CaseError(LoopwardenError, ValueError):
    """A case file that cannot be read; the message names the file and the problem."""
