"""The web page in headless Chromium (Debian `chromium` driven by Playwright): start a run on
the example folder with the real report pipeline, watch the bar reach 100%, see the PDF, and
survive forced reconnects without losing or duplicating a timeline line. A second test checks
that model output is shown as text and nothing remote is ever loaded."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

import httpx

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from helpers import require_binary  # noqa: E402
from loopwarden.server.app import create_app  # noqa: E402
from loopwarden.server.settings import ServerSettings  # noqa: E402
from server_jobs import approval_job, serve_in_thread, ticking_job  # noqa: E402

EXAMPLES = TESTS.parent / "examples"


def settings_for(tmp_path: Path, roots: list[Path]) -> ServerSettings:
    return ServerSettings(
        db_path=tmp_path / "state" / "runs.db", runs_dir=tmp_path / "state" / "runs", allowed_roots=roots
    )


def wait_until(page: Any, predicate: str, timeout: float = 30_000) -> None:
    """Poll a JS predicate with page.evaluate: Playwright's wait_for_function evaluates strings
    with eval, which the page's Content-Security-Policy (rightly) forbids."""
    waited = 0.0
    while not page.evaluate(predicate):
        assert waited < timeout, f"timed out waiting for {predicate}"
        page.wait_for_timeout(100)
        waited += 100


def timeline_seqs(page: Any) -> list[int]:
    return [int(s) for s in page.eval_on_selector_all("#timeline li", "items => items.map(li => li.dataset.seq)")]


def test_start_a_report_run_watch_it_finish_and_see_the_pdf(tmp_path: Path, browser: Any) -> None:
    require_binary("xelatex")
    app = create_app(settings_for(tmp_path, [EXAMPLES]))  # the real report pipeline, offline
    with serve_in_thread(app) as base:
        page = browser.new_page()
        requests: list[str] = []
        pdf_responses: list[Any] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("response", lambda r: pdf_responses.append(r) if r.url.endswith("/report.pdf") else None)
        page.goto(base)
        page.wait_for_selector("#folder-select option", state="attached")
        folder = next(
            o["value"]
            for o in page.eval_on_selector_all("#folder-select option", "os => os.map(o => ({value: o.value}))")
            if o["value"].endswith("field-scan")
        )
        page.select_option("#folder-select", folder)
        page.click("#start")
        page.wait_for_url("**/#/runs/*")
        run_id = page.url.rsplit("/", 1)[1]

        # Force reconnects while the run is live: once early, once after some progress.
        wait_until(page, "() => document.querySelectorAll('#timeline li').length >= 3", timeout=60_000)
        page.evaluate("window.loopwarden.stream.drop()")
        wait_until(page, "() => window.loopwarden.stream.connections >= 2", timeout=30_000)
        wait_until(
            page, "Number(document.getElementById('progress').getAttribute('aria-valuenow')) >= 20", timeout=120_000
        )
        # A drop after the end changes nothing; only a drop of a live stream must reconnect.
        live = page.evaluate("() => { const s = window.loopwarden.stream; const on = !s.ended; s.drop(); return on; }")

        wait_until(page, "document.getElementById('progress').getAttribute('aria-valuenow') === '100'", timeout=180_000)
        page.wait_for_selector("#result-card:not([hidden])", timeout=60_000)
        assert page.text_content("#run-status") in ("completed", "degraded")
        assert page.evaluate("window.loopwarden.stream.connections") >= (3 if live else 2)
        assert "100%" in (page.text_content("#progress-label") or "")

        # The PDF is shown in the page.
        wait_until(page, "() => document.getElementById('pdf').src.endsWith('/report.pdf')")
        page.wait_for_timeout(500)
        box = page.locator("#pdf").bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 200
        pdf = httpx.get(f"{base}/api/runs/{run_id}/artifacts/report.pdf")
        assert pdf.headers["content-type"] == "application/pdf" and pdf.content.startswith(b"%PDF")
        assert any(r.status == 200 for r in pdf_responses)

        # Every event exactly once, in order, after the reconnects.
        run = httpx.get(f"{base}/api/runs/{run_id}").json()
        assert timeline_seqs(page) == list(range(1, run["last_seq"] + 1))

        # Markdown and LaTeX views, the coverage ledger, the stage names.
        page.click(".tabs button[data-tab=md]")
        page.wait_for_selector("#markdown h2, #markdown h1")
        page.click(".tabs button[data-tab=tex]")
        wait_until(page, "document.getElementById('latex').textContent.includes('documentclass')")
        assert page.locator("#coverage tbody tr").count() >= 1
        assert "explore" in (page.text_content("#stages") or "")
        network = [url for url in requests if url.startswith(("http:", "https:", "ws:", "wss:"))]
        assert all(url.startswith(base) for url in network), [u for u in network if not u.startswith(base)]
        # Chromium's own PDF viewer opened the report inside the page's frame.
        for _ in range(300):
            if any(url.startswith("chrome-extension://") and "pdf" in url for url in requests):
                break
            page.wait_for_timeout(100)
        else:
            raise AssertionError("the PDF viewer never opened the report")

        # The runs list shows it.
        page.goto(base)
        page.wait_for_selector(f"#runs tr[data-id='{run_id}']")


def test_model_output_stays_text_and_nothing_remote_loads(tmp_path: Path, browser: Any) -> None:
    root = tmp_path / "allowed"
    (root / "exp").mkdir(parents=True)
    evil = '<img src="http://evil.invalid/x.png" onerror="window.pwned=1"> ![x](http://evil.invalid/y.png) **b**'
    (root / "exp" / "job.json").write_text(json.dumps({"events": 150, "delay": 0.01, "text": evil}))
    app = create_app(settings_for(tmp_path, [root]), ticking_job)
    with serve_in_thread(app) as base:
        page = browser.new_page()
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "exp"}).json()["id"]
        page.goto(f"{base}/#/runs/{run_id}")
        # The page opens its stream only after it has read the run, which takes longer on a loaded machine.
        wait_until(page, "() => window.loopwarden.stream !== null", timeout=60_000)
        for _ in range(5):  # drop the connection repeatedly while events stream in
            page.wait_for_timeout(150)
            page.evaluate("window.loopwarden.stream.drop()")
        page.wait_for_selector("#result-card:not([hidden])", timeout=60_000)
        page.click(".tabs button[data-tab=md]")
        page.wait_for_selector("#markdown .blocked")
        run = httpx.get(f"{base}/api/runs/{run_id}").json()
        assert timeline_seqs(page) == list(range(1, run["last_seq"] + 1))
        assert page.evaluate("window.pwned === undefined")
        assert page.locator("#timeline img, #markdown img[src^='http']").count() == 0
        assert "remote image not loaded" in (page.text_content("#markdown") or "")
        assert page.locator("#markdown strong").count() >= 1
        assert not [url for url in requests if "evil.invalid" in url]


def test_approve_a_paused_call_from_the_page(tmp_path: Path, browser: Any) -> None:
    root = tmp_path / "allowed"
    (root / "exp").mkdir(parents=True)
    (root / "exp" / "data.csv").write_text("t,v\n0,1\n")
    app = create_app(settings_for(tmp_path, [root]), approval_job)
    with serve_in_thread(app) as base:
        page = browser.new_page()
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "exp"}).json()["id"]
        page.goto(f"{base}/#/runs/{run_id}")
        page.wait_for_selector("#approvals-card:not([hidden]) button.approve")
        assert "delete_file" in (page.text_content("#approvals") or "")
        assert page.text_content("#run-status") == "paused"
        page.click("#approvals button.approve")
        page.wait_for_selector("#result-card:not([hidden])")
        wait_until(page, "document.getElementById('run-status').textContent === 'completed'")
        assert page.is_hidden("#approvals-card")
        approval = httpx.get(f"{base}/api/runs/{run_id}/approvals").json()[0]
        assert approval["status"] == "approved"
        assert "approved" in (page.text_content("#timeline") or "")


def test_upload_a_zip_from_the_page(tmp_path: Path, browser: Any) -> None:
    archive = tmp_path / "exp.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("exp/data.csv", "t,v\n0,1\n")
        zf.writestr("job.json", json.dumps({"events": 4}))
    app = create_app(settings_for(tmp_path, []), ticking_job)
    with serve_in_thread(app) as base:
        page = browser.new_page()
        page.goto(base)
        page.set_input_files("#files", str(archive))
        assert page.is_checked("input[name=source][value=upload]")
        page.click("#start")
        page.wait_for_url("**/#/runs/*")
        page.wait_for_selector("#result-card:not([hidden])")
        wait_until(page, "document.getElementById('run-status').textContent === 'completed'")
        assert "upload (2 files)" in (page.text_content("#run-source") or "")
        assert page.evaluate("document.getElementById('progress').getAttribute('aria-valuenow')") == "100"
