"""Failure classification and redaction (Retry-After and backoff: test_retry.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models.faults import kind_of_status, model_error, redact


@pytest.mark.parametrize(
    ("status", "detail", "kind"),
    [
        (429, "", "rate_limited"),
        (500, "", "server_error"),
        (503, "", "server_error"),
        (408, "", "timeout"),
        (425, "", "server_error"),
        (409, "", "server_error"),
        (401, "", "auth"),
        (403, "", "auth"),
        (402, "Insufficient Balance", "billing"),
        (404, "", "model_not_found"),
        (400, "This model's maximum context length is 8192 tokens", "context_length"),
        (400, "Prompt is too long", "context_length"),
        (413, "request exceeds the model's maximum", "context_length"),
        (400, "invalid tool schema", "bad_request"),
        (422, "Invalid parameters", "bad_request"),
    ],
)
def test_status_kinds(status: int, detail: str, kind: str) -> None:
    assert kind_of_status(status, detail) == kind


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEF0123456789", min_size=10, max_size=40))
def test_the_key_is_redacted_wherever_it_appears(key: str) -> None:
    message = f"Incorrect API key provided: {key}. Authorization: Bearer {key}"
    assert key not in redact(message, key)


def test_key_shaped_strings_are_redacted_without_knowing_the_key() -> None:
    assert "sk-live-abcdef123456" not in redact("your key sk-live-abcdef123456 is wrong")
    assert "Bearer [redacted]" in redact("header Bearer abc.def.ghi")


def test_model_error_message_names_the_fix_and_hides_the_key() -> None:
    key = "sk-abcdefghijklmnop"
    error = model_error(
        "auth", f"bad key {key}", status=401, model="m", endpoint="https://api.deepseek.com", secret=key
    )
    assert error.kind == "auth" and not error.retryable and error.status == 401
    assert "LOOPWARDEN_API_KEY" in error.message and key not in error.message
    retried = model_error("timeout", "slow", status=None, model="m", endpoint="e", secret=None, attempts=3)
    assert retried.retryable and "after 3 attempts" in retried.message
