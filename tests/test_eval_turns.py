"""Turn-level expectations, case kinds (false interventions), case models that react to the
runtime, and the eval command's handling of odd case sets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from loopwarden.cli import build_app
from loopwarden.eval.behaviour import CaseModel
from loopwarden.eval.case import Case, ModelSpec, ToolSpec
from loopwarden.eval.case_tools import build_tool
from loopwarden.eval.metrics import suite_metrics
from loopwarden.eval.runner import CaseResult, run_case, trace_path
from loopwarden.eval.suite import run_suite
from loopwarden.models import ModelRequest

READ_FILE: dict[str, Any] = {
    "name": "read_file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    "by_args": [
        {"args": {"path": "a.txt"}, "result": {"data": "alpha"}},
        {"args": {"path": "b.txt"}, "result": {"data": "beta"}},
    ],
}
FINISH: dict[str, Any] = {
    "name": "finish",
    "terminal": True,
    "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]},
}
COLLAPSE = {"repeat_forever": {"call": "read_file", "args": {"path": "a.txt"}}}
HEALTHY = {
    "script": [{"call": "read_file", "args": {"path": "a.txt"}}, {"call": "read_file", "args": {"path": "b.txt"}}]
}


def make_case(**fields: Any) -> Case:
    data: dict[str, Any] = {"name": "c", "input": "go", "tools": [READ_FILE]}
    data.update(fields)
    return Case.model_validate(data)


def write_case(folder: Path, file: str, **fields: Any) -> Path:
    data: dict[str, Any] = {"input": "go", "tools": [READ_FILE], "model": {"script": [{"text": "done"}]}}
    data.update(fields)
    path = folder / f"{file}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def forced(name: str | None = None, choice: Any = None, tools: bool = True) -> ModelRequest:
    schema = [
        {"type": "function", "function": {"name": "read_file"}},
        {"type": "function", "function": {"name": "finish"}},
    ]
    return ModelRequest(
        messages=[{"role": "user", "content": "go"}],
        tools=schema if tools else [],
        tool_choice={"type": "function", "function": {"name": name}} if name else choice,
    )


# -- turn facts and the expectations on them ----------------------------------------------------


async def test_a_total_collapse_has_its_turns_counted() -> None:
    result = await run_case(make_case(model=COLLAPSE))
    # call 2 is answered from the cache (no intervention), call 3 steers, call 5 stops the phase
    assert result.first_intervention_turn == 3
    assert result.stop_turn == 5
    assert result.phase_model_calls == 5 and result.wrap_up_calls == 1
    assert result.interventions[0] == "repeated_call:nudged" and result.interventions[-1] == "repeated_call:stopped"
    assert result.first_turns == {"repeated_call": 3}


async def test_turn_expectations_fail_with_reasons_when_violated() -> None:
    case = make_case(
        model=COLLAPSE,
        expect={
            "first_intervention_by": 2,
            "stop_by": 4,
            "no_intervention": True,
            "detectors_any": ["cycle", "error_loop"],
            "max_phase_model_calls": 4,
            "max_wrap_up_calls": 0,
            "expected_rescued": True,
        },
    )
    result = await run_case(case)
    text = "\n".join(result.reasons)
    for fragment in (
        "first in turn 3, expected by turn 2",
        "stopped in turn 5, expected a stop by turn 4",
        "stepped in on a healthy run",
        "none of ['cycle', 'error_loop'] stepped in",
        "5 model calls in the tool phase, at most 4",
        "1 wrap-up model calls, at most 0",
        "rescued=False, expected True",
    ):
        assert fragment in text
    assert len(result.reasons) == 7


async def test_turn_expectations_pass_when_met() -> None:
    case = make_case(
        model=COLLAPSE,
        kind="loop",
        expect={
            "first_intervention_by": 3,
            "stop_by": 5,
            "detectors_any": ["cycle", "repeated_call"],
            "max_phase_model_calls": 5,
            "max_wrap_up_calls": 1,
            "expected_rescued": False,
        },
    )
    result = await run_case(case)
    assert result.passed, result.reasons


async def test_a_never_stopped_run_fails_first_intervention_and_stop_expectations() -> None:
    result = await run_case(make_case(model=HEALTHY, expect={"first_intervention_by": 9, "stop_by": 9}))
    assert result.first_intervention_turn is None and result.stop_turn is None
    assert "stepped in never" in result.reasons[0] and "was never stopped" in result.reasons[1]


async def test_cached_answers_and_malformed_call_refusals_are_not_interventions() -> None:
    script = [
        {"call": "read_file", "args": {"path": "a.txt"}},
        {"call": "read_file", "args": {"path": "a.txt"}},  # answered from the cache
        {"call": "read_file", "args": {"file": "b.txt"}},  # breaks the schema: refused
        {"call": "read_file", "args": "{not json"},
        {"call": "read_file", "args": {"path": "b.txt"}},
        {"call": "no_such_tool"},
    ]
    result = await run_case(make_case(model={"script": script}, kind="healthy", expect={"no_intervention": True}))
    assert result.passed, result.reasons
    assert result.interventions == [] and not result.false_intervention


async def test_a_loop_case_the_guard_never_touches_fails() -> None:
    result = await run_case(make_case(model=HEALTHY, kind="loop"))
    assert result.reasons == ["a loop case that was neither stopped nor steered"]


# -- false interventions per suite --------------------------------------------------------------


def test_suite_metrics_count_false_interventions_and_per_detector_turns() -> None:
    def r(name: str, kind: str, **first: int) -> CaseResult:
        steps = [f"{d}:nudged" for d in first]
        return CaseResult(name=name, intent="i", kind=kind, passed=True, interventions=steps, first_turns=first)

    results = [
        r("l1", "loop", cycle=4),
        r("l2", "loop", cycle=8, repeated_call=3),
        r("l3", "loop"),
        r("h1", "healthy"),
        r("h2", "healthy", no_progress=5),
    ]
    suite = suite_metrics(results)
    assert (suite.loop_cases, suite.loops_caught) == (3, 2)
    assert (suite.healthy_cases, suite.false_interventions, suite.false_intervention_cases) == (2, 1, ["h2"])
    assert suite.false_intervention_rate == 0.5
    by = {d.detector: d for d in suite.detectors}
    assert (by["cycle"].loops_caught, by["cycle"].first_turn_median, by["cycle"].first_turn_worst) == (2, 6, 8)
    assert by["no_progress"].false_interventions == 1 and by["no_progress"].loops_caught == 0


def test_the_eval_exits_nonzero_on_a_false_intervention_and_names_it(tmp_path: Path) -> None:
    # `expect` can say nothing: a healthy case the guard steps in on fails on its kind alone.
    write_case(tmp_path, "healthy-but-collapses", kind="healthy", model=COLLAPSE)
    write_case(tmp_path, "healthy-reads", kind="healthy", model=HEALTHY)
    app, cli = build_app(), CliRunner()
    out = cli.invoke(app, ["eval", str(tmp_path)])
    assert out.exit_code == 1
    assert "false interventions: 1/2 healthy cases (50%): healthy-but-collapses" in out.output
    payload = json.loads(cli.invoke(app, ["eval", str(tmp_path), "--json"]).stdout)
    assert payload["suite"]["false_interventions"] == 1
    assert payload["intents"][0]["false_intervention_rate"] == 0.5


# -- case models that react to the runtime ------------------------------------------------------


async def test_an_obeying_model_calls_the_forced_function_with_its_arguments() -> None:
    spec = ModelSpec.model_validate({**COLLAPSE, "tool_choice": "obey", "forced_args": {"summary": "s"}})
    model = CaseModel(spec)
    assert (await model.complete(forced())).tool_calls[0].name == "read_file"
    obeyed = await model.complete(forced("finish"))
    assert [(c.name, json.loads(c.arguments)) for c in obeyed.tool_calls] == [("finish", {"summary": "s"})]
    answer = await model.complete(forced(choice="none"))
    assert answer.text == spec.final and not answer.tool_calls


async def test_an_ignoring_model_goes_on_with_its_script_whatever_is_forced() -> None:
    model = CaseModel(ModelSpec.model_validate(COLLAPSE))
    for request in (forced("finish"), forced(choice="none"), forced(choice="required")):
        assert [c.name for c in (await model.complete(request)).tool_calls] == ["read_file"]


async def test_a_model_that_never_answers_replies_with_calls_only() -> None:
    spec = ModelSpec.model_validate(
        {"script": [{"call": "read_file", "args": {"path": "a.txt"}}], "never_answers": True}
    )
    model = CaseModel(spec)
    await model.complete(forced())
    asked = await model.complete(ModelRequest(messages=[{"role": "user", "content": "answer"}], tools=[]))
    assert [c.name for c in asked.tool_calls] == ["read_file"] and not asked.text
    obeying = CaseModel(spec.model_copy(update={"tool_choice": "obey"}))
    silent = await obeying.complete(forced(choice="none"))
    assert silent.text == "" and not silent.tool_calls


async def test_a_collapse_rescued_by_the_forced_terminal_tool_is_a_fallback() -> None:
    model = {**COLLAPSE, "tool_choice": "obey", "forced_args": {"summary": "alpha"}}
    result = await run_case(make_case(tools=[READ_FILE, FINISH], model=model, expect={"expected_rescued": True}))
    assert result.passed, result.reasons
    assert (result.status, result.stop_reason, result.fallback) == ("completed", "terminal_tool", True)


# -- case tools and the command line ------------------------------------------------------------


async def test_raw_false_hands_data_over_as_plain_success() -> None:
    body = {"success": False, "code": "Q"}
    for raw, ok in ((True, False), (False, True)):
        tool = build_tool(ToolSpec.model_validate({"name": "o", "raw": raw, "results": [{"data": body}]}))
        result = tool.to_result(await tool.call(tool.args_model.model_validate({})))
        assert result.ok is ok and (result.data == body if ok else result.error_type == "Q")
    script = build_tool(
        ToolSpec.model_validate({"name": "s", "raw": False, "script": "def run(a, n):\n    return {'ok': False}\n"})
    )
    assert script.to_result(await script.call(script.args_model.model_validate({}))).ok


def test_duplicate_case_names_exit_2_naming_both_files(tmp_path: Path) -> None:
    first = write_case(tmp_path, "one", name="same")
    second = write_case(tmp_path, "two", name="same")
    out = CliRunner().invoke(build_app(), ["eval", str(tmp_path)])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit)  # no traceback
    flat = "".join(out.output.split())  # the console may wrap long paths
    assert "'same'" in flat and "".join(str(first).split()) in flat and "".join(str(second).split()) in flat


def test_an_empty_folder_is_a_usage_error(tmp_path: Path) -> None:
    out = CliRunner().invoke(build_app(), ["eval", str(tmp_path)])
    assert out.exit_code == 2 and "no cases" in out.output


def test_a_case_name_never_makes_traces_write_outside_their_folder(tmp_path: Path) -> None:
    cases, traces = tmp_path / "cases", tmp_path / "out" / "traces"
    cases.mkdir()
    for n, name in enumerate(["../x", "/etc/y", "a/b", "a_b", ".."]):
        write_case(cases, f"c{n}", name=name)
    out = CliRunner().invoke(build_app(), ["eval", str(cases), "--traces", str(traces)])
    assert out.exit_code == 0, out.output
    written = sorted(p.name for p in traces.iterdir())
    assert len(written) == 5 and all(p.parent == traces for p in traces.iterdir())
    assert sorted(p.name for p in tmp_path.rglob("*.jsonl")) == written
    assert trace_path(traces, "plain-name") == traces / "plain-name.jsonl"


def test_the_suite_report_holds_the_turn_facts(tmp_path: Path) -> None:
    write_case(tmp_path, "collapse", kind="loop", model=COLLAPSE, expect={"first_intervention_by": 3})
    report = asyncio.run(run_suite([tmp_path]))
    (case,) = report.cases
    assert case.passed and case.first_intervention_turn == 3
    assert report.suite.loops_caught == 1 and report.suite.detectors[0].detector == "repeated_call"
