"""Draft validation: a draft is accepted only if it is a complete LaTeX document with no
tool-call markup that (where xelatex exists) compiles; otherwise the model is reinforced and
asked again, at most three times (`draft_attempts`), and then a clear failure event follows."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from helpers import require_binary
from loopwarden.cli import build_app
from loopwarden.models import ModelRequest, ScriptedModel
from loopwarden.report.config import DRAFT_ATTEMPTS, ReportConfig
from loopwarden.report.events import DraftFailed, DraftRejected
from loopwarden.report.write.draft import documentclass_problem, extract_latex, leak_problem
from reportkit import collect, finished, milestones, terminal_states

VALID_TEX = (
    "\\documentclass{article}\n\\begin{document}\n\\section{Results}\n"
    "The columns soil\\_temp\\_c and moisture\\_pct were read.\n\\end{document}\n"
)
DSML = (
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read_file">\n'
    '<｜DSML｜parameter name="path" string="true">field_scan.csv</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
)
REVIEW_DONE = '{"major_issues": [], "minor_issues": [], "done": true}'


@pytest.mark.parametrize(
    "text",
    [
        DSML,
        '<tool_call>{"name": "read_file", "arguments": {"path": "a.csv"}}</tool_call>',
        '{"tool_calls": [{"id": "1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}',
        VALID_TEX.replace("\\end{document}", "<tool_call>{}</tool_call>\n\\end{document}"),
    ],
)
def test_tool_call_markup_is_refused(text: str) -> None:
    assert leak_problem(text) is not None


def test_plain_latex_passes_the_text_checks() -> None:
    assert leak_problem(VALID_TEX) is None
    assert documentclass_problem(VALID_TEX) is None
    assert documentclass_problem("\\section{Results} no preamble") is not None
    assert documentclass_problem("\\documentclass{article}\\begin{document} cut off") is not None


def test_extract_latex_unwraps_fences_and_chatter() -> None:
    reply = f"Here is the report:\n```latex\n{VALID_TEX}```\nLet me know if you need changes."
    assert extract_latex(reply) == VALID_TEX
    assert extract_latex(f"Sure!\n{VALID_TEX}\nDone.") == VALID_TEX


async def test_dsml_leak_then_retry_then_valid_draft(tmp_path: Path) -> None:
    writer = ScriptedModel([DSML, VALID_TEX, REVIEW_DONE], name="writer")
    events = await collect(tmp_path, writer=writer)
    rejected = [e for e in events if isinstance(e, DraftRejected)]
    assert len(rejected) == 1
    assert rejected[0].stage == "draft" and rejected[0].attempt == 1 and "tool-call markup" in rejected[0].problem
    # the retry was told it has no tools and must give the complete LaTeX source
    retry = writer.requests[1]
    assert "You have no tools now; output the complete LaTeX source" in retry.messages[-1]["content"]
    assert all(request.tools == [] for request in writer.requests), "drafting never offers tools"
    draft_done = next(m for m in milestones(events) if m.stage == "draft" and m.state == "done")
    assert draft_done.detail["drafted_by"] == "writer"
    assert not any(isinstance(e, DraftFailed) for e in events)
    assert "soil\\_temp\\_c" in (tmp_path / "out" / "report.tex").read_text()
    assert finished(events).status == "completed"


async def test_three_invalid_drafts_give_a_clear_failure_event(tmp_path: Path) -> None:
    writer = ScriptedModel(
        [DSML, "I cannot do that without tools.", "\\section{Results} only a fragment"], name="writer"
    )
    events = await collect(tmp_path, writer=writer)
    rejected = [e for e in events if isinstance(e, DraftRejected)]
    assert [e.attempt for e in rejected] == [1, 2, 3]
    failed = [e for e in events if isinstance(e, DraftFailed)]
    assert len(failed) == 1
    assert failed[0].attempts == 3 and failed[0].stage == "draft"
    assert "offline writer" in failed[0].fallback and "3 attempt" in failed[0].message
    assert writer.calls == 3, "no fourth draft is requested"
    done = finished(events)
    assert done.status == "degraded" and "draft_failed" in done.stop_reasons
    assert terminal_states(events)[-1][0] == milestones(events)[0].total


async def test_draft_attempts_bounds_the_drafts_asked_for(tmp_path: Path) -> None:
    writer = ScriptedModel([DSML, "I cannot do that without tools.", VALID_TEX], name="writer")
    events = await collect(tmp_path, writer=writer, draft_attempts=2)
    assert [e.attempt for e in events if isinstance(e, DraftRejected)] == [1, 2]
    assert all(e.max_attempts == 2 for e in events if isinstance(e, DraftRejected))
    failed = [e for e in events if isinstance(e, DraftFailed)]
    assert len(failed) == 1 and failed[0].attempts == 2 and "2 attempt" in failed[0].message
    assert writer.calls == 2, "no third draft is requested"
    assert finished(events).status == "degraded"


def test_draft_attempts_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="draft_attempts"):
        ReportConfig(data_dir=tmp_path, out_dir=tmp_path / "out", draft_attempts=0)
    app = build_app()
    refused = CliRunner().invoke(app, ["report", str(tmp_path), "--draft-attempts", "0"])
    assert refused.exit_code == 2 and "--draft-attempts" in refused.output
    shown = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"}).output
    assert f"(default {DRAFT_ATTEMPTS})" in " ".join(shown.split())  # the help's number is the config's


async def test_three_invalid_drafts_under_strict_fail_the_run(tmp_path: Path) -> None:
    writer = ScriptedModel([DSML, DSML, DSML], name="writer")
    events = await collect(tmp_path, writer=writer, strict=True)
    assert any(isinstance(e, DraftFailed) for e in events)
    done = finished(events)
    assert done.status == "failed"
    later = [
        (m.stage, m.state, m.detail.get("reason", ""))
        for m in milestones(events)
        if m.index > 5 and m.state != "started"
    ]
    assert later and all(state == "skipped" and reason.startswith("not run") for _, state, reason in later)
    assert terminal_states(events)[-1][0] == milestones(events)[0].total
    assert "report.tex" not in done.outputs, "a failed run does not present a report as complete"


async def test_a_draft_that_does_not_compile_is_refused_with_the_log_error(tmp_path: Path) -> None:
    require_binary("xelatex")
    broken = VALID_TEX.replace("\\section{Results}", "\\section{Results}\n\\notacommand")
    writer = ScriptedModel([broken, VALID_TEX, REVIEW_DONE], name="writer")
    events = await collect(tmp_path, writer=writer, toolchain=None)
    rejected = [e for e in events if isinstance(e, DraftRejected)]
    assert len(rejected) == 1
    assert "does not compile" in rejected[0].problem and "Undefined control sequence" in rejected[0].problem
    assert finished(events).status == "completed"
    assert (tmp_path / "out" / "report.pdf").is_file()


def test_draft_prompt_carries_facts_sources_and_skeleton(tmp_path: Path) -> None:
    from loopwarden.report.folder.scan import scan_folder
    from loopwarden.report.templates import load_template
    from loopwarden.report.write.bib import collect_sources
    from loopwarden.report.write.draft import draft_messages
    from loopwarden.report.write.offline_writer import WriterInput
    from reportkit import make_folder, make_record

    data = make_folder(tmp_path)
    scan = scan_folder(data)
    sources = collect_sources(data, scan)
    inp = WriterInput(load_template("lab"), make_record(), scan, [], sources)
    messages = draft_messages(inp, [{"key": s.key, "title": s.title} for s in sources])
    user = messages[-1]["content"]
    assert "soil_temp_c" in user and "smith2024" in user
    assert "\\documentclass" in user and "% Write the results section here" in user
    request = ModelRequest(messages=messages, tier="main")
    assert request.tools == []
