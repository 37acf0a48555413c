"""`/docs` without a CDN: FastAPI's default Swagger page loads its script and styles from a CDN,
which an offline machine (and many servers) cannot reach. The Swagger UI files come from the
`fastapi-offline` package (it ships them; we use only the files) and are served from here; the
page itself has no inline script, so it keeps the same strict Content-Security-Policy as the
rest of the site."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} API</title>
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" type="image/png" href="{assets}/favicon.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="/static/docs.js"></script>
</body>
</html>
"""


def swagger_assets() -> Path:
    """The folder holding swagger-ui-bundle.js and swagger-ui.css."""
    return Path(str(importlib.resources.files("fastapi_offline") / "static"))


def mount_docs(app: FastAPI) -> None:
    """Serve /docs from local files (create the app with docs_url=None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=swagger_assets()), name="docs-assets")
    page = _PAGE.format(title=app.title, assets=ASSETS_URL)

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(page)
