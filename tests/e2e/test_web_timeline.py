"""The run page tells a run as a scientist would, in headless Chromium (Debian `chromium` driven by
Playwright): the real report pipeline explores a folder with a scripted explorer that reads a
table, draws a figure and then asks for the same read again and again. The timeline says "Read
field_scan.csv", "Drew ...", "Stopped a repeat", never raw event JSON; the Markdown report's
tables are tables; an offline writer is named as such instead of "0 tokens"; the bar moves
inside the explore stage; a cancelled run says it was cancelled, not "is xelatex installed?"."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from test_web_page import settings_for, wait_until  # noqa: E402

from loopwarden.events import Event  # noqa: E402
from loopwarden.models import FunctionModel, ModelRequest, ToolCall, call  # noqa: E402
from loopwarden.report.pipeline import ReportModels, run_report  # noqa: E402
from loopwarden.server.app import create_app  # noqa: E402
from reportkit import NO_LATEX, make_folder  # noqa: E402
from server_jobs import GatedJob, serve_in_thread  # noqa: E402

FIGURE_CODE = "df = load('field_scan.csv')\nplt.plot(df['soil_temp_c'], df['moisture_pct'], 'o')"


def looping_explorer(request: ModelRequest) -> ToolCall:
    """Reads the table, draws it, then asks for the same read until the guard stops it."""
    rounds = sum(1 for m in request.messages if m.get("role") == "assistant" and m.get("tool_calls"))
    offered = {t["function"]["name"] for t in request.tools}
    if rounds == 1 and "make_figure" in offered:
        figure = {"code": FIGURE_CODE, "filename": "temp_vs_moisture", "caption": "Moisture by temperature"}
        return call("make_figure", figure)
    return call("read_file", {"path": "field_scan.csv"})


async def scripted_job(config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
    models = ReportModels(explorer=FunctionModel(looping_explorer, name="scripted-explorer"))
    async for event in run_report(config, run_id=run_id, start_seq=start_seq, models=models, toolchain=NO_LATEX):
        yield event


def timeline(page: Any) -> list[dict[str, Any]]:
    return list(
        page.eval_on_selector_all(
            "#timeline li",
            "items => items.map(li => ({seq: Number(li.dataset.seq), type: li.dataset.type,"
            " text: li.querySelector('.what').textContent, shown: li.offsetParent !== null}))",
        )
    )


def test_the_timeline_tells_what_was_read_drawn_and_stopped(tmp_path: Path, browser: Any) -> None:
    root = tmp_path / "allowed"
    make_folder(root)  # root/data: field_scan.csv, protocol.md
    app = create_app(settings_for(tmp_path, [root]), scripted_job)
    with serve_in_thread(app) as base:
        page = browser.new_page()
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "data"}).json()["id"]
        page.goto(f"{base}/#/runs/{run_id}")
        page.wait_for_selector("#result-card:not([hidden])", timeout=120_000)
        wait_until(page, "document.getElementById('progress').getAttribute('aria-valuenow') === '100'")
        run = httpx.get(f"{base}/api/runs/{run_id}").json()
        lines = timeline(page)
        assert [line["seq"] for line in lines] == list(range(1, run["last_seq"] + 1)), "every event once, in order"
        shown = [line["text"] for line in lines if line["shown"]]
        text = "\n".join(shown)
        assert "Read field_scan.csv" in text
        assert "Stopped a repeat: read_file" in text
        assert any(t.startswith("Listed the folder: 2 files") for t in shown)
        assert "Drafted the report (offline writer, no model)" in text
        probed = next(line for line in lines if line["type"] == "isolation_probed")
        if "switched off" not in probed["text"]:  # figures need an OS isolation layer
            assert "Drew temp_vs_moisture: Moisture by temperature" in text
        # No raw JSON anywhere in the timeline, and bookkeeping stays out of sight until asked for.
        raw = [line for line in lines if line["text"].lstrip().startswith("{") or '":' in line["text"]]
        assert not raw, raw
        quiet = [line for line in lines if line["type"] in ("tool_call_proposed", "stage_progress")]
        assert quiet and not any(line["shown"] for line in quiet)
        page.check("#every-event")
        assert all(line["shown"] for line in timeline(page))
        # The totals name the offline writer; the scripted explorer is a model, so its calls count.
        totals = page.text_content("#run-totals") or ""
        assert "model calls" in totals
        # The Markdown report's tables are tables, with their header cells.
        page.click(".tabs button[data-tab=md]")
        page.wait_for_selector("#markdown table thead th")
        headers = page.eval_on_selector_all("#markdown table thead th", "ths => ths.map(th => th.textContent)")
        assert {"Kind", "Files"} <= set(headers), headers
        cells = page.eval_on_selector_all("#markdown table tbody td", "tds => tds.map(td => td.textContent)")
        assert "field_scan.csv" in " ".join(cells) and not any(c.startswith("|") for c in cells)
        assert page.locator("#markdown pre").count() == 0  # no table left as raw pipes
        # No PDF because xelatex was not found, and the page says exactly that.
        assert "xelatex is not installed" in (page.text_content("#no-pdf") or "")


def test_an_offline_run_says_no_model_and_the_bar_moves_inside_explore(tmp_path: Path, browser: Any) -> None:
    root = tmp_path / "allowed"
    data = make_folder(root)
    for i in range(12):
        (data / f"extra_{i:02d}.csv").write_text("t,v\n" + "\n".join(f"{t},{t * i}" for t in range(5)) + "\n")

    shown = threading.Event()  # set by the test once the page shows the bar inside explore

    async def offline_job(config: Any, *, run_id: str | None = None, start_seq: int = 0) -> AsyncIterator[Event]:
        async for event in run_report(config, run_id=run_id, start_seq=start_seq, toolchain=NO_LATEX):
            yield event
            data = event.model_dump()
            if event.type == "stage_progress" and data["stage"] == "explore" and data["files_read"] > 0:
                # Held mid-explore (files read, stage not ended) until the page has shown it.
                await asyncio.to_thread(shown.wait, 60)

    app = create_app(settings_for(tmp_path, [root]), offline_job)
    with serve_in_thread(app) as base:
        page = browser.new_page()
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "data"}).json()["id"]
        page.goto(f"{base}/#/runs/{run_id}")
        wait_until(page, "/files read/.test(document.getElementById('progress-label').textContent)", timeout=120_000)
        label = page.text_content("#progress-label") or ""
        assert "explore" in label and "/14 files read" in label, label
        assert "files read" in (page.text_content("#stages li.started") or "")
        shown.set()
        page.wait_for_selector("#result-card:not([hidden])", timeout=120_000)
        totals = "document.getElementById('run-totals').textContent"
        wait_until(page, f"/offline explorer and writer, no model/.test({totals})")
        assert "tokens" not in (page.text_content("#run-totals") or "")


def test_a_cancelled_run_says_cancelled_not_a_missing_xelatex(tmp_path: Path, browser: Any) -> None:
    root = tmp_path / "allowed"
    (root / "exp").mkdir(parents=True)
    (root / "exp" / "data.csv").write_text("t,v\n0,1\n")
    job = GatedJob()  # waits inside its first stage until released: never, here
    app = create_app(settings_for(tmp_path, [root]), job)
    with serve_in_thread(app) as base:
        page = browser.new_page()
        run_id = httpx.post(f"{base}/api/runs", json={"folder": "exp"}).json()["id"]
        page.goto(f"{base}/#/runs/{run_id}")
        page.wait_for_selector("#timeline li")
        page.click("#cancel")
        page.wait_for_selector("#result-card:not([hidden])", timeout=60_000)
        wait_until(page, "document.getElementById('run-status').textContent === 'cancelled'")
        wait_until(page, "document.getElementById('no-pdf').textContent.includes('cancelled')")
        assert "xelatex" not in (page.text_content("#no-pdf") or "")
