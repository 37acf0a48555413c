"""The plan is fixed before the run, and the run keeps to it: every milestone carries index,
fixed total and its own stage name, early convergence still labels later stages right, and the
last event reaches 100%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import require_binary
from loopwarden.models import FunctionModel, ModelRequest
from loopwarden.report import plan as plan_module
from loopwarden.report.events import ReflectionVerdict
from loopwarden.report.pipeline import ReportConfig, plan_pipeline, run_report
from loopwarden.report.plan import Toolchain
from reportkit import NO_LATEX, collect, finished, make_folder, milestones, terminal_states

VALID_TEX = "\\documentclass{article}\n\\begin{document}\n\\section{Introduction}\nSoil field scan.\n\\end{document}\n"

EXPECTED_PLANS = {
    ("lab", True): ["scan", "explore", "figures", "gap", "draft", "reflect", "reflect", "reflect", "bib", "compile"],
    ("lab", False): ["scan", "explore", "figures", "gap", "draft", "reflect", "reflect", "reflect", "bib"],
    ("brief", True): ["scan", "explore", "draft", "bib", "compile"],
    ("brief", False): ["scan", "explore", "draft", "bib"],
}


@pytest.mark.parametrize(("template", "xelatex"), list(EXPECTED_PLANS))
def test_plan_for_every_template_and_xelatex(tmp_path: Path, template: str, xelatex: bool) -> None:
    config = ReportConfig(data_dir=tmp_path, out_dir=tmp_path / "out", template=template)
    stages = plan_pipeline(config, xelatex=xelatex)
    assert [s.name for s in stages] == EXPECTED_PLANS[(template, xelatex)]
    assert [s.index for s in stages] == list(range(1, len(stages) + 1))
    rounds = [s.label for s in stages if s.name == "reflect"]
    assert rounds == [f"reflect {i}/{len(rounds)}" for i in range(1, len(rounds) + 1)]


def test_pdf_off_drops_compile_even_with_xelatex(tmp_path: Path) -> None:
    config = ReportConfig(data_dir=tmp_path, out_dir=tmp_path / "out", pdf=False)
    assert "compile" not in [s.name for s in plan_pipeline(config, xelatex=True)]


def test_template_from_a_path_switches_steps(tmp_path: Path) -> None:
    custom = tmp_path / "mine"
    custom.mkdir()
    builtin = Path(plan_module.__file__).parent / "templates" / "lab"
    (custom / "report.tex.j2").write_text((builtin / "report.tex.j2").read_text())
    spec = (builtin / "template.toml").read_text().replace("reflect_rounds = 3", "reflect_rounds = 1")
    (custom / "template.toml").write_text(spec.replace("gap = true", "gap = false"))
    config = ReportConfig(data_dir=tmp_path, out_dir=tmp_path / "out", template=str(custom))
    names = [s.name for s in plan_pipeline(config, xelatex=False)]
    assert names == ["scan", "explore", "figures", "draft", "reflect", "bib"]


def _assert_progress_is_whole(events: list, expected: list[str]) -> None:
    ms = milestones(events)
    assert {m.total for m in ms} == {len(expected)}, "the denominator never changes"
    ends = terminal_states(events)
    assert [stage for _, stage, _ in ends] == expected
    assert [index for index, _, _ in ends] == list(range(1, len(expected) + 1))
    assert ends[-1][0] == ms[0].total, "the last milestone reaches 100%"
    assert events[-1].type == "report_finished"


async def test_offline_run_follows_its_plan_and_ends_at_100(tmp_path: Path) -> None:
    events = await collect(tmp_path)
    _assert_progress_is_whole(events, EXPECTED_PLANS[("lab", False)])
    ends = terminal_states(events)
    # the record was given (explore skipped), it has no figures (skipped); reflection converged at round 1
    assert ("explore", "skipped") in [(s, st) for _, s, st in ends]
    assert [(i, st) for i, s, st in ends if s == "reflect"] == [(6, "done"), (7, "skipped"), (8, "skipped")]
    done = finished(events)
    assert done.status == "completed"
    assert (tmp_path / "out" / "report.tex").is_file() and (tmp_path / "out" / "report.md").is_file()
    assert sorted(done.outputs) == ["events.jsonl", "references.bib", "report.md", "report.tex"]


async def test_events_jsonl_holds_every_event_in_order(tmp_path: Path) -> None:
    events = await collect(tmp_path, template="brief")
    lines = (tmp_path / "out" / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [e.seq for e in events]
    assert json.loads(lines[-1])["type"] == "report_finished"


def _converging_writer(done_after_round: int = 1) -> FunctionModel:
    reviews = {"n": 0}

    def reply(request: ModelRequest) -> str:
        system = request.messages[0]["content"]
        if "You review" in system and "Revise" not in request.messages[-1]["content"]:
            reviews["n"] += 1
            done = reviews["n"] >= done_after_round
            return json.dumps({"major_issues": [] if done else ["add the findings"], "minor_issues": [], "done": done})
        return VALID_TEX

    return FunctionModel(reply, name="writer")


async def test_reflection_stopping_after_round_one_of_three_still_labels_bib_and_compile(tmp_path: Path) -> None:
    require_binary("xelatex")
    events = await collect(tmp_path, writer=_converging_writer(1), toolchain=None)
    expected = EXPECTED_PLANS[("lab", True)]
    _assert_progress_is_whole(events, expected)
    ends = terminal_states(events)
    assert ends[-2:] == [(9, "bib", "done"), (10, "compile", "done")]
    assert [st for _, s, st in ends if s == "reflect"] == ["done", "skipped", "skipped"]
    verdicts = [e for e in events if isinstance(e, ReflectionVerdict)]
    assert [(v.round, v.done, v.outcome) for v in verdicts] == [(1, True, "converged_done")]
    assert finished(events).status == "completed"
    assert (tmp_path / "out" / "report.pdf").read_bytes().startswith(b"%PDF")


async def test_reflection_stops_when_revision_changes_nothing(tmp_path: Path) -> None:
    # the reviewer never says done, but the revision returns the same text: converged, unchanged
    events = await collect(tmp_path, writer=_converging_writer(done_after_round=99))
    verdicts = [e for e in events if isinstance(e, ReflectionVerdict)]
    assert [(v.round, v.outcome) for v in verdicts] == [(1, "converged_unchanged")]
    assert verdicts[0].change == 0.0
    assert [st for _, s, st in terminal_states(events) if s == "reflect"] == ["done", "skipped", "skipped"]
    assert terminal_states(events)[-1] == (9, "bib", "done")


async def test_xelatex_is_probed_once_and_the_plan_and_compile_share_it(tmp_path: Path, monkeypatch) -> None:
    asked: list[str] = []

    def which(name: str) -> str | None:
        asked.append(name)
        return None  # as if no LaTeX is installed

    monkeypatch.setattr(plan_module.shutil, "which", which)
    make_folder(tmp_path)
    config = ReportConfig(data_dir=tmp_path / "data", out_dir=tmp_path / "out", template="brief")
    from reportkit import make_record

    events = [e async for e in run_report(config, exploration=make_record())]
    assert asked.count("xelatex") == 1
    assert "compile" not in [m.stage for m in milestones(events)]
    assert "report.pdf" not in finished(events).outputs


async def test_gap_with_nothing_to_check_is_skipped_and_progress_completes(tmp_path: Path) -> None:
    custom = tmp_path / "nogap"
    custom.mkdir()
    builtin = Path(plan_module.__file__).parent / "templates" / "brief"
    (custom / "report.tex.j2").write_text((builtin / "report.tex.j2").read_text())
    spec = (builtin / "template.toml").read_text().replace("gap = false", "gap = true")
    (custom / "template.toml").write_text(
        spec.replace('needs = ["goal"]', "needs = []")
        .replace('needs = ["files"]', "needs = []")
        .replace('needs = ["findings"]', "needs = []")
    )
    events = await collect(tmp_path, template=str(custom))
    ends = terminal_states(events)
    assert (3, "gap", "skipped") in ends
    assert ends[-1][0] == milestones(events)[0].total


async def test_bad_input_at_run_time_ends_with_a_failed_report_finished(tmp_path: Path) -> None:
    config = ReportConfig(data_dir=tmp_path / "missing", out_dir=tmp_path / "out")
    events = [e async for e in run_report(config, toolchain=NO_LATEX)]
    assert len(events) == 1
    assert finished(events).status == "failed" and "does not exist" in finished(events).message
    assert not (tmp_path / "out").exists()


async def test_a_model_error_in_drafting_degrades_to_the_offline_report(tmp_path: Path) -> None:
    from loopwarden.models import ModelError, ScriptedModel

    writer = ScriptedModel([ModelError("http_503", "service unavailable", retryable=True)], name="writer")
    events = await collect(tmp_path, writer=writer)
    types = [e.type for e in events]
    assert "model_failed" in types and "draft_failed" in types
    done = finished(events)
    assert done.status == "degraded" and "draft_failed" in done.stop_reasons
    assert "Written without a language model" in (tmp_path / "out" / "report.tex").read_text()
    assert terminal_states(events)[-1][0] == milestones(events)[0].total


def test_toolchain_without_xelatex_cannot_compile() -> None:
    assert not Toolchain(None, "/usr/bin/bibtex", None).can_compile


async def test_a_missing_figure_is_reported_and_left_out(tmp_path: Path) -> None:
    from loopwarden.report.events import FigureMade
    from reportkit import make_record, write_png

    write_png(tmp_path / "out" / "figures" / "temp.png")
    record = make_record(figure=tmp_path)
    record.figures.append(record.figures[0].model_copy(update={"path": "figures/gone.png", "caption": "Lost"}))
    events = await collect(tmp_path, record=record)
    dropped = [e for e in events if isinstance(e, FigureMade) and not e.ok]
    assert [e.path for e in dropped] == ["figures/gone.png"]
    tex = (tmp_path / "out" / "report.tex").read_text()
    assert "figures/temp.png" in tex and "Soil temperature by site" in tex and "gone.png" not in tex
    figures_done = next(m for m in milestones(events) if m.stage == "figures" and m.state == "done")
    assert figures_done.detail["figures"] == 1 and figures_done.detail["dropped"] == 1


async def test_outputs_claim_only_what_this_run_wrote(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.pdf").write_bytes(b"%PDF-1.5 from an earlier run")
    events = await collect(tmp_path, template="brief")
    assert "report.pdf" not in finished(events).outputs
    assert (out / "report.pdf").read_bytes() == b"%PDF-1.5 from an earlier run", "an earlier PDF is never deleted"
    assert "report.tex" in finished(events).outputs


async def test_a_cancelled_run_leaves_a_cancelled_final_event_in_the_log(tmp_path: Path) -> None:
    import asyncio

    started = asyncio.Event()

    async def hang(request: ModelRequest) -> str:
        started.set()
        await asyncio.sleep(3600)
        return VALID_TEX

    task = asyncio.ensure_future(collect(tmp_path, writer=FunctionModel(hang, name="writer")))
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = json.loads((tmp_path / "out" / "events.jsonl").read_text().splitlines()[-1])
    assert last["type"] == "report_finished" and last["status"] == "cancelled"


async def test_the_first_milestone_tells_the_whole_plan_and_the_deliverable(tmp_path: Path) -> None:
    events = await collect(tmp_path)
    first = milestones(events)[0]
    assert first.index == 1 and first.state == "started"
    assert first.detail["plan"] == [
        "scan", "explore", "figures", "gap check", "draft", "reflect 1/3", "reflect 2/3", "reflect 3/3", "bibliography"
    ]  # fmt: skip
    assert first.detail["deliverable"] == "report.tex (xelatex not found: no PDF)"


async def test_cjk_names_in_an_english_report_load_a_cjk_font(tmp_path: Path, monkeypatch) -> None:
    from loopwarden.report import stages
    from reportkit import make_record

    monkeypatch.setattr(stages, "find_cjk_font", lambda: "Noto Serif CJK SC")
    record = make_record(findings=["样品 A1 最热"])
    events = await collect(tmp_path, template="brief", record=record)
    assert finished(events).status == "completed"
    assert "\\setCJKmainfont{Noto Serif CJK SC}" in (tmp_path / "out" / "report.tex").read_text()
    plain = await collect(tmp_path / "second", template="brief")
    assert finished(plain).status == "completed"
    assert "xeCJK" not in (tmp_path / "second" / "out" / "report.tex").read_text()
