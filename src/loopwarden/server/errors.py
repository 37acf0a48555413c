"""Bad requests answered in one line. FastAPI's validation errors are a list of dicts; the API
answers them as `{"detail": "query parameter offset: Input should be less than or equal to ..."}`,
still a 422, so every malformed path, id, query value or body reads as a single reason."""

from __future__ import annotations

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

_WHERE = {"query": "query parameter", "path": "path parameter", "header": "header", "body": "body field"}


async def one_line_validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    errors = error.errors()
    first = errors[0] if errors else {}
    location = [str(part) for part in first.get("loc", ())]
    where = _WHERE.get(location[0], location[0]) if location else "request"
    name = ".".join(location[1:])
    message = str(first.get("msg", "invalid value")).splitlines()[0][:200]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return JSONResponse({"detail": f"{where} {name}: {message}{more}".replace(" :", ":")}, status_code=422)
