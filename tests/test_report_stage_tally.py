"""The summary's per-stage figures: model calls (every attempt that reached the server), errors
with their kinds, seconds — tallied from a real report run's events."""

from __future__ import annotations

from pathlib import Path

from loopwarden.models import ModelError, ScriptedModel
from loopwarden.report.stage_tally import StageTally
from reportkit import collect

REVIEW_DONE = '{"major_issues": [], "minor_issues": [], "done": true}'


async def test_each_stage_shows_its_model_calls_and_errors(tmp_path: Path) -> None:
    refusal = ModelError("context_length", "too long for the window", status=400, attempts=2)
    writer = ScriptedModel(["no latex", refusal], name="writer")
    tally = StageTally()
    for event in await collect(tmp_path, writer=writer):
        tally.add(event)
    rows = dict(tally.rows())
    assert rows["draft"].startswith("3 model calls, 1 errors (context_length)")
    assert "explore" not in rows  # the exploration record was given: no model asked there
    assert tally.stages["draft"].seconds >= 0.0


async def test_a_stage_that_never_asked_a_model_has_no_row(tmp_path: Path) -> None:
    tex = "\\documentclass{article}\n\\begin{document}\nSoil.\n\\end{document}\n"
    tally = StageTally()
    for event in await collect(tmp_path, writer=ScriptedModel([tex, REVIEW_DONE], name="writer")):
        tally.add(event)
    assert set(dict(tally.rows())) == {"draft", "reflect"}
    assert dict(tally.rows())["reflect"].startswith("1 model calls, 0 errors")
