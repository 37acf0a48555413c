"""/docs works offline: the Swagger UI page, in headless Chromium, renders the API's operations
from files this server serves, under the site's strict Content-Security-Policy, and no request
leaves 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from helpers import chromium_browser  # noqa: E402
from loopwarden.server.app import create_app  # noqa: E402
from loopwarden.server.security import PAGE_CSP  # noqa: E402
from loopwarden.server.settings import ServerSettings  # noqa: E402
from server_jobs import serve_in_thread, ticking_job  # noqa: E402

# No --disable-background-networking etc.: any request Chromium or the page makes must show up.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]


@pytest.fixture
def browser() -> Iterator[Any]:
    yield from chromium_browser(CHROMIUM_ARGS)


def test_docs_render_the_operations_with_nothing_remote(tmp_path: Path, browser: Any) -> None:
    settings = ServerSettings(db_path=tmp_path / "runs.db", runs_dir=tmp_path / "runs", allowed_roots=[])
    app = create_app(settings, ticking_job)
    with serve_in_thread(app) as base:
        page_response = httpx.get(f"{base}/docs")
        assert page_response.headers["content-security-policy"] == PAGE_CSP
        assert "<script>" not in page_response.text  # no inline script: the policy can forbid it

        page = browser.new_page()
        requests: list[str] = []
        problems: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(f"{base}/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=30_000)
        paths = page.locator(".opblock-summary-path").all_text_contents()
        assert "/api/runs/{run_id}/approvals/{call_id}" in paths and "/api/runs" in paths
        # Open one operation: its parameters and schemas render too.
        page.locator(".opblock-summary", has_text="/api/runs/{run_id}/approvals/{call_id}").click()
        page.wait_for_selector(".opblock-body .parameters", timeout=30_000)
        assert "call_id" in (page.text_content(".opblock-body") or "")

        network = [url for url in requests if url.startswith(("http:", "https:", "ws:", "wss:"))]
        assert network and all(url.startswith(base + "/") for url in network), network
        assert any(url.endswith("/swagger-ui-bundle.js") for url in network)
        assert problems == []  # a CSP violation or a failed load is a console error
