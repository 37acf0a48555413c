"""Bearer-token check and the headers that keep model output inert in the browser."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from fastapi import HTTPException, Request, Response

from .settings import ServerSettings

COOKIE = "loopwarden_token"
# Nothing remote is ever loaded: model output may contain image/link markup pointing anywhere.
PAGE_CSP = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; "
    "frame-src 'self'; object-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
)
# /docs is served from local files under the page's own policy (docs.py); ReDoc still loads from a CDN.
_DOCS_PATHS = ("/redoc",)


def token_matches(settings: ServerSettings, presented: str | None) -> bool:
    if settings.token is None:
        return True
    expected = settings.token.get_secret_value()
    return presented is not None and secrets.compare_digest(presented.encode(), expected.encode())


def presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    return request.cookies.get(COOKIE)


def require_token(request: Request) -> None:
    settings: ServerSettings = request.app.state.settings
    if not token_matches(settings, presented_token(request)):
        raise HTTPException(
            status_code=401, detail="missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
        )


async def security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    response = await call_next(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if not request.url.path.startswith(_DOCS_PATHS):
        response.headers.setdefault("Content-Security-Policy", PAGE_CSP)
        response.headers.setdefault("X-Frame-Options", "SAMEORIGIN")
    return response
