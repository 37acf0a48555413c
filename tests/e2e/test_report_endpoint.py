"""The writing stages against a real OpenAI-compatible HTTP server on 127.0.0.1, through the
official `openai` SDK: the configured endpoint's main tier drafts and reviews with no tools
offered, a 429 is retried, a DSML leak is refused and retried, and usage is counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopwarden.models.config import DEFAULT_PRICES, EndpointConfig
from loopwarden.report.events import DraftRejected, ReflectionVerdict
from loopwarden.report.explore.offline import OfflineExplorer
from loopwarden.report.pipeline import ReportConfig, ReportModels, run_report
from openai_server import Reply, ScriptedServer, completion, error, usage
from reportkit import NO_LATEX, finished, make_folder

DRAFT = (
    "Here is the report.\n```latex\n\\documentclass{article}\n\\begin{document}\n\\section{Results}\n"
    "The columns soil\\_temp\\_c and moisture\\_pct were profiled \\cite{smith2024}.\n\\end{document}\n```"
)
DSML = '<｜DSML｜function_calls><｜DSML｜invoke name="read_file"></｜DSML｜invoke></｜DSML｜function_calls>'


async def test_report_writer_over_http(tmp_path: Path) -> None:
    make_folder(tmp_path)
    script = [error(429, "slow down", retry_after="0"), DSML, DRAFT]

    def respond(body: dict[str, Any]) -> Reply:
        system = body["messages"][0]["content"]
        if "You review" in system:
            verdict = {"major_issues": [], "minor_issues": ["tighten the wording"], "done": True}
            return Reply(body=completion(json.dumps(verdict), model=body["model"], usage_=usage(300, 40)))
        item = script.pop(0) if script else DRAFT
        if isinstance(item, Reply):
            return item
        return Reply(body=completion(item, model=body["model"], usage_=usage(1000, 200)))

    with ScriptedServer(respond=respond) as server:
        endpoint = EndpointConfig(
            base_url=server.base_url,
            cheap_model="small-1",
            main_model="deepseek-v4-pro",
            max_retries=2,
            retry_base_delay=0,
        )
        config = ReportConfig(data_dir=tmp_path / "data", out_dir=tmp_path / "out", endpoint=endpoint)
        models = ReportModels(explorer=OfflineExplorer())
        events = [e async for e in run_report(config, models=models, toolchain=NO_LATEX)]
        bodies = list(server.requests)

    done = finished(events)
    assert done.status == "completed", done.message
    assert "drafted by deepseek-v4-pro" in done.message
    writer_bodies = [b for b in bodies if b["model"] == "deepseek-v4-pro"]
    assert len(writer_bodies) == 4, "429 + DSML draft + valid draft + one review"
    assert all(not b.get("tools") for b in writer_bodies), "drafting and review offer no tools"
    rejected = [e for e in events if isinstance(e, DraftRejected)]
    assert len(rejected) == 1 and "tool-call markup" in rejected[0].problem
    verdicts = [e for e in events if isinstance(e, ReflectionVerdict)]
    assert [(v.round, v.outcome, v.minor_issues) for v in verdicts] == [(1, "converged_done", ["tighten the wording"])]
    tex = (tmp_path / "out" / "report.tex").read_text()
    assert tex.startswith("\\documentclass") and "Here is the report" not in tex and "```" not in tex
    assert "\\bibliography{references}" in tex and "smith2024" in (tmp_path / "out" / "references.bib").read_text()
    assert done.totals.prompt_tokens >= 2 * 1000 + 300 and done.totals.completion_tokens >= 2 * 200 + 40
    assert "soil_temp_c" in (tmp_path / "out" / "report.md").read_text()
    price = DEFAULT_PRICES["deepseek-v4-pro"]
    expected_cost = (2300 * price.input + 440 * price.output) / 1e6  # two drafts and one review, at list price
    assert done.totals.cost == pytest.approx(expected_cost)
