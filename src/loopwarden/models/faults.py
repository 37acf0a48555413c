"""What a failed HTTP call to a model means, whether to try again, how long to wait, and what
to tell the user — in words they can act on and with no secret in them."""

from __future__ import annotations

import re

from ..retry import is_retryable_status
from ..retry import retry_after_seconds as retry_after_seconds  # one parser for the runtime: retry.py
from .base import ModelError

RETRYABLE_KINDS = frozenset({"rate_limited", "server_error", "timeout", "connection"})

_CONTEXT_WORDS = re.compile(
    r"context[ _-]?length|maximum context|context window|too many tokens|prompt is too long|"
    r"reduce the length|exceeds? the (?:model'?s? )?(?:maximum|max)",
    re.IGNORECASE,
)
_KEY_LIKE = re.compile(r"\b(?:sk|key|api[_-]?key)[-_][A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)


def redact(text: str, secret: str | None = None) -> str:
    """Remove the key (and anything shaped like a key) from a message meant for humans."""
    if secret:
        text = text.replace(secret, "[redacted]")
        if len(secret) > 8:
            text = text.replace(secret[:8], "[redacted]")
    return _KEY_LIKE.sub("[redacted]", _BEARER.sub(r"\1[redacted]", text))


def kind_of_status(status: int, detail: str) -> str:
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "auth"
    if status == 402:
        return "billing"
    if status == 404:
        return "model_not_found"
    if is_retryable_status(status):  # the runtime's one set (retry.py): 408, 409, 425, 5xx
        return "timeout" if status == 408 else "server_error"
    if status in (400, 413, 422) and _CONTEXT_WORDS.search(detail):
        return "context_length"
    return "bad_request"


def advice(kind: str, *, model: str, endpoint: str) -> str:
    """What the user should do about a failure of this kind."""
    return {
        "auth": f"the endpoint {endpoint} rejected the API key: set LOOPWARDEN_API_KEY (or the provider's "
        "key variable, e.g. DEEPSEEK_API_KEY) to a valid key, or pass --api-key",
        "billing": f"the account at {endpoint} cannot pay for this request (insufficient balance): top it up",
        "model_not_found": f"model {model!r} does not exist at {endpoint}: check the model name (--model, "
        "LOOPWARDEN_CHEAP_MODEL / LOOPWARDEN_MAIN_MODEL) and that the base URL is right (often it ends in /v1); "
        "`loopwarden doctor` lists the models the endpoint offers",
        "context_length": f"the conversation is longer than {model!r} accepts: use a model with a longer context "
        "or give the agent less to read at once",
        "bad_request": f"the endpoint {endpoint} refused the request as invalid",
        "rate_limited": f"the endpoint {endpoint} kept rate-limiting the requests: wait, or lower concurrency",
        "server_error": f"the endpoint {endpoint} kept failing with server errors: try again later",
        "timeout": f"the endpoint {endpoint} did not answer in time: raise --timeout or try again later",
        "connection": f"cannot connect to {endpoint}: check the base URL and that the server is running",
        "empty_reply": f"model {model!r} returned an empty reply twice",
        "malformed_reply": f"model {model!r} returned a reply that could not be read",
    }.get(kind, "")


def model_error(
    kind: str, detail: str, *, status: int | None, model: str, endpoint: str, secret: str | None, attempts: int = 1
) -> ModelError:
    told = advice(kind, model=model, endpoint=endpoint)
    after = f" after {attempts} attempts" if attempts > 1 else ""
    status_text = f"HTTP {status}: " if status else ""
    message = redact(f"{told}{after} ({status_text}{detail.strip()[:500]})", secret)
    return ModelError(kind, message, retryable=kind in RETRYABLE_KINDS, status=status)
