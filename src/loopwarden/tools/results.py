"""A tool call's outcome: `ToolResult`, what the model reads of it, and the parsers that tell a
failure in disguise (an HTTP 200 with an error body) from data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..hotpath.fastjson import encoder, string_encoder
from ..retry import is_retryable_status

_SCALARS = frozenset({str, int, float, bool, type(None)})
_content_json = encoder(ensure_ascii=False, separators=(", ", ": "), default=str)
_scalar_content_json = encoder(ensure_ascii=False, separators=(", ", ": "), default=str, check_circular=False)
"""The same bytes for an object of scalars, which cannot hold itself: no C encoder made per call."""
_string_json = string_encoder(ensure_ascii=False)
"""How `_content_json` writes a string (the C encoder calls this very function for one)."""


class ToolResult(BaseModel):
    """The structured outcome of one tool call; what the model sees."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    data: Any = None
    error_type: str | None = None
    retryable: bool = False
    user_action: str | None = None
    message: str | None = None

    @classmethod
    def success(cls, data: Any = None, message: str | None = None) -> ToolResult:
        return cls(ok=True, data=data, message=message)

    @classmethod
    def failure(
        cls,
        error_type: str,
        message: str,
        *,
        retryable: bool = False,
        user_action: str | None = None,
        data: Any = None,
    ) -> ToolResult:
        return cls(
            ok=False,
            error_type=error_type,
            message=message,
            retryable=retryable,
            user_action=user_action,
            data=data,
        )

    def to_model_content(self) -> str:
        """The tool message content: compact JSON, only the fields that say something."""
        fields = self.__dict__
        if fields["ok"] and fields["message"] is None and fields["user_action"] is fields["error_type"] is None:
            data = fields["data"]  # the common result: data alone
            if type(data) is str:  # the encoder's own bytes for it, without the encoder: its string part
                return f'{{"ok": true, "data": {_string_json(data)}}}'
            if type(data) in _SCALARS:
                return _scalar_content_json({"ok": True} if data is None else {"ok": True, "data": data})
        if type(self.data) in _SCALARS:  # what model_dump would give, without it
            payload = {k: v for k, v in self.__dict__.items() if v is not None}
        else:
            payload = self.model_dump(exclude_none=True)
        if self.ok:
            payload.pop("retryable", None)
        return _content_json(payload)


ResultParser = Callable[[Any], "ToolResult | None"]
"""Turns a tool's raw return value into a failure when it is one in disguise; None = success."""


def business_failure(data: Any) -> ToolResult | None:
    """Default result parser: only a failure the data states explicitly, `{"success": false}` or
    `{"ok": false}` (an HTTP 200 with an error body). A record that merely has a failed status
    (`{"status": "failed"}`, a job's state) is data; `status_failure` and `http_status_failure`
    read those shapes when a tool opts in (`result_parser=failure_parsers(...)`)."""
    if not isinstance(data, dict):
        return None
    for flag in ("success", "ok"):
        if data.get(flag) is False:
            code = data.get("code") or data.get("error_code") or data.get("error") or "business_error"
            message = data.get("message") or data.get("msg") or data.get("error") or f"{flag}=false"
            return ToolResult.failure(str(code), str(message), data=data)
    return None


def status_failure(data: Any) -> ToolResult | None:
    """Opt-in: `{"status": "error" | "failed" | "failure"}` is the call's own failure (JSend style)."""
    status = data.get("status") if isinstance(data, dict) else None
    if isinstance(status, str) and status.lower() in {"error", "failed", "failure"}:
        message = data.get("message") or data.get("error") or f"status={status}"
        return ToolResult.failure(str(data.get("code") or "business_error"), str(message), data=data)
    return None


def http_status_failure(data: Any) -> ToolResult | None:
    """Opt-in: `{"status_code": >= 400}` is an HTTP failure, retryable as retry.py says."""
    status_code = data.get("status_code") if isinstance(data, dict) else None
    if isinstance(status_code, int) and not isinstance(status_code, bool) and status_code >= 400:
        message = data.get("message") or data.get("error") or f"HTTP {status_code}"
        retryable = is_retryable_status(status_code)
        return ToolResult.failure(f"http_{status_code}", str(message), retryable=retryable, data=data)
    return None


def failure_parsers(*parsers: ResultParser) -> ResultParser:
    """One parser from several: the first failure any of them finds."""

    def parse(data: Any) -> ToolResult | None:
        for parser in parsers:
            if (failure := parser(data)) is not None:
                return failure
        return None

    return parse
