"""Reflection: a structured verdict per round; a material revision goes on to the next round,
an unreadable verdict or a rejected revision stops the loop with the draft kept."""

from __future__ import annotations

import json
from pathlib import Path

from loopwarden.models import ModelRequest, ScriptedModel
from loopwarden.report.events import ReflectionVerdict
from loopwarden.report.write.reflect import change_fraction, parse_verdict
from reportkit import collect, finished, terminal_states

V1 = "\\documentclass{article}\n\\begin{document}\n\\section{Results}\nFirst draft.\n\\end{document}\n"
V2 = V1.replace("First draft.", "Soil temperature ranges 11.9--13.1 C.")


def _verdict(done: bool, major: list[str] | None = None) -> str:
    return json.dumps({"major_issues": major or [], "minor_issues": [], "done": done})


def test_parse_verdict_accepts_fenced_json_and_refuses_prose() -> None:
    verdict = parse_verdict('```json\n{"major_issues": ["x"], "minor_issues": [], "done": false}\n```')
    assert verdict is not None and verdict.major_issues == ["x"] and not verdict.done
    assert parse_verdict("Looks good to me!") is None
    assert parse_verdict('{"major_issues": "not a list"}') is None


def test_change_fraction() -> None:
    assert change_fraction(V1, V1) == 0.0
    assert change_fraction(V1, V2) > 0.1


async def test_a_material_revision_goes_on_to_the_next_round(tmp_path: Path) -> None:
    writer = ScriptedModel([V1, _verdict(False, ["findings missing"]), V2, _verdict(True)], name="writer")
    events = await collect(tmp_path, writer=writer)
    verdicts = [e for e in events if isinstance(e, ReflectionVerdict)]
    assert [(v.round, v.outcome) for v in verdicts] == [(1, "continue"), (2, "converged_done")]
    assert verdicts[0].major_issues == ["findings missing"] and verdicts[0].change and verdicts[0].change > 0.1
    assert [st for _, s, st in terminal_states(events) if s == "reflect"] == ["done", "done", "skipped"]
    revise: ModelRequest = writer.requests[2]
    assert "findings missing" in revise.messages[-1]["content"]
    assert "11.9--13.1" in (tmp_path / "out" / "report.tex").read_text()
    assert finished(events).status == "completed"


async def test_an_unreadable_verdict_stops_reflection_and_keeps_the_draft(tmp_path: Path) -> None:
    writer = ScriptedModel([V1, "It is fine.", "Really, it is fine."], name="writer")
    events = await collect(tmp_path, writer=writer)
    verdicts = [e for e in events if isinstance(e, ReflectionVerdict)]
    assert [(v.round, v.outcome) for v in verdicts] == [(1, "verdict_unreadable")]
    assert writer.calls == 3, "one reminder, then the loop stops"
    assert "First draft." in (tmp_path / "out" / "report.tex").read_text()
    assert terminal_states(events)[-1][0] == 9


async def test_a_rejected_revision_keeps_the_previous_draft(tmp_path: Path) -> None:
    writer = ScriptedModel([V1, _verdict(False, ["x"]), "no latex here", "still none"], name="writer")
    events = await collect(tmp_path, writer=writer)
    verdicts = [e for e in events if isinstance(e, ReflectionVerdict)]
    assert [(v.round, v.outcome) for v in verdicts] == [(1, "revision_rejected")]
    assert "First draft." in (tmp_path / "out" / "report.tex").read_text()


async def test_a_model_error_in_review_stops_reflection_with_the_draft_kept(tmp_path: Path) -> None:
    from loopwarden.models import ModelError

    writer = ScriptedModel([V1, ModelError("timeout", "read timed out", retryable=True)], name="writer")
    events = await collect(tmp_path, writer=writer)
    verdicts = [e for e in events if isinstance(e, ReflectionVerdict)]
    assert [(v.round, v.outcome) for v in verdicts] == [(1, "model_error")]
    assert "model_failed" in [e.type for e in events]
    assert "First draft." in (tmp_path / "out" / "report.tex").read_text()
    assert finished(events).status == "degraded" and "reflection_model_error" in finished(events).stop_reasons
