"""The page, in headless Chromium, with the real report pipeline (without its PDF: see
server_jobs.report_without_pdf): a run started with "approve figure
code" ticked pauses at each figure; the page shows the model-written code and its buttons decide.
One figure approved is drawn, another denied is not, and the run completes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from loopwarden.server.app import create_app  # noqa: E402
from loopwarden.server.settings import ServerSettings  # noqa: E402
from server_jobs import report_without_pdf, serve_in_thread  # noqa: E402

EXAMPLES = TESTS.parent / "examples"
APPROVED, DENIED = "data_scan_1000mA", "data_scan_1500mA"


def test_page_approves_one_figure_and_denies_another(tmp_path: Path, browser: Any) -> None:
    settings = ServerSettings(
        db_path=tmp_path / "state" / "runs.db", runs_dir=tmp_path / "state" / "runs", allowed_roots=[EXAMPLES]
    )
    app = create_app(settings, report_without_pdf)  # the real report pipeline, offline
    with serve_in_thread(app) as base:
        page = browser.new_page()
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.goto(base)
        page.wait_for_selector("#folder-select option", state="attached")
        options = page.eval_on_selector_all("#folder-select option", "os => os.map(o => o.value)")
        page.select_option("#folder-select", next(v for v in options if v.endswith("field-scan")))
        page.check("input[name=approve_code]")
        page.click("#start")
        page.wait_for_url("**/#/runs/*")
        run_id = page.url.rsplit("/", 1)[1]

        decided: dict[str, str] = {}
        waited = 0
        while not page.is_visible("#result-card"):
            item = page.locator("#approvals li.approval").first
            if not page.is_visible("#approvals-card") or item.count() == 0:
                assert waited < 3000, "the run neither paused nor finished"  # polls of 100 ms
                page.wait_for_timeout(100)
                waited += 1
                continue
            call_id = item.get_attribute("data-call-id")
            code = item.locator("pre.code").text_content() or ""
            assert "load(" in code  # the model-written code is shown in full, as text
            name = next((n for n in (APPROVED, DENIED) if n in (item.text_content() or "")), "other")
            decision = "approve" if name == APPROVED else "deny"
            item.locator(f"button.{decision}").click()
            page.wait_for_selector(f"#approvals li[data-call-id='{call_id}']", state="detached", timeout=60_000)
            decided[name] = decision
        assert decided.get(APPROVED) == "approve" and decided.get(DENIED) == "deny"
        run = httpx.get(f"{base}/api/runs/{run_id}").json()
        assert run["status"] in ("completed", "degraded"), run["message"]
        assert {a["status"] for a in run["approvals"]} == {"approved", "denied"}
        names = {a["name"] for a in run["artifacts"]}
        assert f"figures/{APPROVED}.png" in names and f"figures/{DENIED}.png" not in names
        assert "denied" in (page.text_content("#timeline") or "")
        network = [url for url in requests if url.startswith(("http:", "https:", "ws:", "wss:"))]
        assert all(url.startswith(base) for url in network), [u for u in network if not u.startswith(base)]
