"""One HTTP attempt at a model, failed: what kind of failure it was (from the SDK's exception
and the server's error body), whether it reached the server, which request field it names."""

from __future__ import annotations

import json
from dataclasses import dataclass

import openai

from .base import Usage
from .budget import Fitted
from .faults import invalid_field, invalid_reason, kind_of_status, retry_after_seconds

TURNED_AWAY = frozenset({"rate_limited", "auth", "billing", "model_not_found"})
SHORTER_AFTER_TIMEOUT = 1024
"""The output cap of a retry after a timeout when the first attempt had none."""


class Attempt(Exception):
    """One failed HTTP attempt, classified."""

    def __init__(
        self,
        kind: str,
        detail: str,
        status: int | None = None,
        retry_after: float | None = None,
        *,
        reached: bool = True,
        field: str | None = None,
    ):
        super().__init__(detail)
        self.kind, self.detail, self.status, self.retry_after = kind, detail, status, retry_after
        self.reached = reached
        """The request got to the server (it may have spent tokens on it)."""
        self.field = field


class Spent:
    """What one `complete` cost across its attempts."""

    def __init__(self) -> None:
        self.attempts = 0
        self.usage = Usage()


@dataclass
class Progress:
    """Where one call's attempts stand: the request as it will be sent next, whether it was
    already shrunk after a refusal, how many attempts timed out."""

    fitted: Fitted
    shrunk: bool = False
    timeouts: int = 0


def status_failure(error: openai.APIStatusError) -> Attempt:
    detail, param = _error_detail(error)
    kind = kind_of_status(error.status_code, detail)
    field = None
    if kind == "invalid_request":
        field = invalid_field(detail, param) or "an unnamed field"
        detail = f"invalid request field {field}: {invalid_reason(detail) or detail[:300]}"
    # Turned away at the door (rate limit, key, billing, unknown model): no model ran, no call is counted.
    reached = kind not in TURNED_AWAY
    headers = dict(error.response.headers)
    return Attempt(kind, detail, error.status_code, retry_after_seconds(headers), reached=reached, field=field)


def _error_detail(error: openai.APIStatusError) -> tuple[str, str | None]:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            param = inner.get("param")
            return str(inner["message"]), str(param) if param and inner.get("type") == "invalid_request_error" else None
        if isinstance(inner, str):
            return inner, None
        if isinstance(inner, dict) and isinstance(inner.get("detail"), list):  # FastAPI's own 422 body
            return json.dumps(inner["detail"])[:2000], None
    return error.message, None


def shorter(fitted: Fitted) -> Fitted:
    """After a timeout: ask for half the output (the reply that timed out was probably long)."""
    cap = fitted.max_tokens // 2 if fitted.max_tokens else SHORTER_AFTER_TIMEOUT
    return Fitted(fitted.messages, max(cap, 128), fitted.clipped_chars, fitted.prompt_tokens, fitted.fits)


def cause(error: Exception) -> str:
    cause = error.__cause__
    return f"{error} ({type(cause).__name__})" if cause else str(error)


def transport_kind(error: Exception) -> str | None:
    """Transport errors raised while a stream is read are not wrapped by the SDK; they come
    from its HTTP library (httpx or httpx2, depending on the SDK version), known by name."""
    names = {cls.__name__ for cls in type(error).__mro__}
    if not type(error).__module__.startswith(("httpx", "httpcore")):
        return None
    return "timeout" if "TimeoutException" in names or "Timeout" in type(error).__name__ else "connection"
