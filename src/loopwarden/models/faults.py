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
_INVALID_REQUEST = re.compile(
    r"validation errors?\b|'loc'\s*:|\"loc\"\s*:|Input should be|Field required|field required|"
    r"Extra inputs are not permitted|invalid_request_error|is not valid under any of the given schemas|"
    r"value is not a valid|none is not an allowed value",
    re.IGNORECASE,
)
_STRONG_INVALID = re.compile(
    r"validation errors?\b|'loc'\s*:|\"loc\"\s*:|Input should be|Field required"
    r"|'dict object' has no attribute|UndefinedError|is undefined",  # a chat template that met a field it needs
    re.I,
)
_TEMPLATE_FIELD = re.compile(r"'dict object' has no attribute '(?P<field>\w+)'|'(?P<undefined>\w+)' is undefined")
_LOC = re.compile(r"""['"]loc['"]\s*:\s*[(\[](?P<parts>[^)\]]*)[)\]]""")
_MSG = re.compile(r"""['"]msg['"]\s*:\s*['"](?P<msg>[^'"]*)['"]""")
_WINDOW = re.compile(
    r"maximum context length is (\d+)|context window of (\d+)|n_ctx\D{0,10}(\d+)|context size \((\d+)\)"
    r"|context length of (\d+)|max_model_len\D{0,10}(\d+)",
    re.IGNORECASE,
)
_VALIDATOR_TAGS = re.compile(r"^(?:typed-dict|function-\w+.*|list\[.*|union\[.*|[A-Z]\w*(?:Message|Request)\w*)$")
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
    if status in (400, 413, 422, 500) and _CONTEXT_WORDS.search(detail):
        return "context_length"
    strict_500 = status == 500 and _STRONG_INVALID.search(detail)
    if strict_500 or (status in (400, 413, 422) and _INVALID_REQUEST.search(detail)):
        # A server that validates requests strictly (llama-cpp-python answers a schema error
        # with HTTP 500): the same request will fail the same way, so it is not retried.
        return "invalid_request"
    if is_retryable_status(status):  # the runtime's one set (retry.py): 408, 409, 425, 5xx
        return "timeout" if status == 408 else "server_error"
    return "bad_request"


def invalid_field(detail: str, param: str | None = None) -> str | None:
    """The request field a validation error names: `messages[1].content` from a pydantic
    `'loc': ('body', 'messages', 1, 'typed-dict', 'content')`, or an OpenAI-style `param`."""
    if param:
        return param
    error = _telling_error(detail)
    if error is not None:
        return error[0]
    template = _TEMPLATE_FIELD.search(detail)
    if template is not None:
        return f"{template['field'] or template['undefined']} (read by the server's chat template)"
    return None


def invalid_reason(detail: str) -> str | None:
    error = _telling_error(detail)
    if error is not None and error[1]:
        return error[1]
    match = _MSG.search(detail)
    return match["msg"] if match else None


def _telling_error(detail: str) -> tuple[str, str] | None:
    """(field path, message) of the validation error that says what is wrong. A message that
    fits none of a union's members (llama-cpp-python's message types) is reported once per
    member: "role should be 'system'", "should be 'user'", ...; the telling one is the error
    that is neither a role mismatch nor a field missing from another member."""
    found: list[tuple[str, str, str, bool]] = []
    for match in _LOC.finditer(detail):
        parts = [p.strip().strip("'\"") for p in match["parts"].split(",")]
        tagged = any(_VALIDATOR_TAGS.match(p) for p in parts if p)
        path = ""
        for part in parts:
            if not part or part == "body" or _VALIDATOR_TAGS.match(part):
                continue
            path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
        around = detail[max(0, match.start() - 60) : match.end() + 200]
        kind = re.search(r"""['"]type['"]\s*:\s*['"](\w+)['"]""", around)
        message = _MSG.search(detail, match.end())
        found.append((path, message["msg"] if message else "", kind.group(1) if kind else "", tagged))
    if not found:
        return None
    telling = [
        (path, msg)
        for path, msg, kind, tagged in found
        if path and not (tagged and (kind == "missing" or (kind == "literal_error" and path.endswith(".role"))))
    ]
    first = found[0]
    return telling[0] if telling else (first[0], first[1])


def context_window_in(detail: str) -> int | None:
    """The context window an error message (or model listing) states, if it states one."""
    match = _WINDOW.search(detail)
    if match is None:
        return None
    return next(int(g) for g in match.groups() if g)


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
        "invalid_request": f"the endpoint {endpoint} rejected the shape of the request (a compatibility "
        "problem, not a transient error; not retried): `loopwarden doctor` finds the message shape it needs",
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
