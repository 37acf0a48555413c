"""The writer's prompts fit the model's context window, every stage caps its output, and a
failed draft says what each attempt's problem was (a context_length refusal is not hidden)."""

from __future__ import annotations

from pathlib import Path

from loopwarden.models import ModelError, ScriptedModel
from loopwarden.models.budget import estimate_tokens
from loopwarden.report.events import DraftFailed
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.record import CoverageEntry, CoverageLedger, TableProfile
from loopwarden.report.templates import load_template
from loopwarden.report.write.draft import STAGE_MAX_TOKENS, draft_messages, facts_for_model
from loopwarden.report.write.offline_writer import WriterInput
from reportkit import collect, finished, make_folder, make_record

REVIEW_DONE = '{"major_issues": [], "minor_issues": [], "done": true}'


def big_input(tmp_path: Path) -> WriterInput:
    record = make_record(findings=[f"Finding {i}: the field peaks at {i}.5 mT near x = {i} mm" for i in range(60)])
    tables = [
        TableProfile(
            path=f"run_{i}.csv",
            rows=500,
            columns=[f"col_{j}" for j in range(40)],
            numeric_summary={f"col_{j}": {"mean": j, "min": 0, "max": 2 * j} for j in range(40)},
        )
        for i in range(10)
    ]
    coverage = CoverageLedger(files=[CoverageEntry(path=f"f{i}.txt", status="unread") for i in range(40)])
    record = record.model_copy(update={"tables": tables, "coverage": coverage, "methodology_notes": "m" * 5000})
    data = make_folder(tmp_path)
    return WriterInput(load_template("lab"), record, scan_folder(data), [], [])


def test_facts_are_cut_by_priority_to_the_budget(tmp_path: Path) -> None:
    inp = big_input(tmp_path)
    whole = facts_for_model(inp, [])
    assert "omitted" not in whole
    cut = facts_for_model(inp, [], budget=1500)
    assert "omitted" in cut and cut["omitted"].startswith("to fit the model's context window")
    assert cut["experiment"] == whole["experiment"] and cut["goal"] == whole["goal"]  # never cut
    assert cut["key_findings"][0] == whole["key_findings"][0]  # the first findings stay
    assert "files_by_status" in cut["coverage"]  # the ledger is summarised, not dropped
    assert cut["coverage"]["files_by_status"] == {"unread": 40}


def test_the_draft_prompt_fits_the_budget_it_is_given(tmp_path: Path) -> None:
    inp = big_input(tmp_path)
    assert estimate_tokens(draft_messages(inp, [])) > 4000
    fitted = draft_messages(inp, [], budget=2048)
    assert estimate_tokens(fitted) <= 2048 + 64
    assert "\\documentclass" in fitted[-1]["content"]  # the skeleton is never cut


class WindowedWriter(ScriptedModel):
    context_window = 4096


async def test_drafting_budgets_to_the_window_and_caps_each_stage(tmp_path: Path) -> None:
    tex = "\\documentclass{article}\n\\begin{document}\nSoil.\n\\end{document}\n"
    writer = WindowedWriter([tex, REVIEW_DONE], name="writer")
    await collect(tmp_path, writer=writer, record=big_input(tmp_path).record)
    draft, review = writer.requests[:2]
    assert draft.max_tokens == STAGE_MAX_TOKENS["draft"] and review.max_tokens == STAGE_MAX_TOKENS["review"]
    assert estimate_tokens(draft.messages) <= 4096 // 2 + 64


async def test_a_context_length_failure_is_named_in_the_draft_failure(tmp_path: Path) -> None:
    refusal = ModelError("context_length", "the conversation is longer than 'writer' accepts", status=400)
    writer = ScriptedModel(["no latex here", refusal], name="writer")
    events = await collect(tmp_path, writer=writer)
    [failed] = [e for e in events if isinstance(e, DraftFailed)]
    assert failed.attempts == 2
    assert "1: the output has no \\documentclass" in failed.message
    assert "2: the model call failed (context_length)" in failed.message
    assert finished(events).status == "degraded"


async def test_failed_attempts_count_as_model_calls_in_the_run_totals(tmp_path: Path) -> None:
    refusal = ModelError("timeout", "no reply in time", attempts=2)
    writer = ScriptedModel([refusal], name="writer")
    events = await collect(tmp_path, writer=writer)
    assert finished(events).totals.model_calls == 2
