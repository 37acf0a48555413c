"""The eval harness: the case format, the scripted case models and tools, the expectations,
the metrics, the baseline diff, and the shipped suite (which must pass, and whose regressions
must be caught)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from loopwarden.cli import build_app
from loopwarden.eval import runner as runner_module
from loopwarden.eval.behaviour import CaseModel
from loopwarden.eval.case import Case, CaseError, ModelSpec, ToolSpec, load_case
from loopwarden.eval.case_tools import build_tool
from loopwarden.eval.diff import diff_results, regressions
from loopwarden.eval.metrics import intent_metrics, percentile
from loopwarden.eval.runner import CaseResult, run_case, run_cases
from loopwarden.eval.suite import load_cases, run_suite
from loopwarden.models import ModelError, ModelRequest

SUITE = Path(__file__).resolve().parents[1] / "evals"
CORE = sorted(SUITE.glob("*.yaml"))
"""The hand-written cases at the top of evals/, each claiming its detector in its expectations
(the public corpus in evals/public/ is judged by turn and kind instead)."""

READ_FILE: dict[str, Any] = {
    "name": "read_file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    "by_args": [
        {"args": {"path": "a.txt"}, "result": {"data": "alpha"}},
        {"args": {"path": "b.txt"}, "result": {"data": "beta"}},
    ],
}


def make_case(**fields: Any) -> Case:
    data: dict[str, Any] = {"name": "c", "input": "go", "tools": [READ_FILE]}
    data.update(fields)
    return Case.model_validate(data)


def write_case(folder: Path, name: str, **fields: Any) -> Path:
    data: dict[str, Any] = {"name": name, "input": "go", "tools": [READ_FILE]}
    data.update(fields)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def request(tools: bool = True, last: str = "tool", users: int = 1) -> ModelRequest:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}] * users
    messages.append({"role": last, "content": "x"})
    schema = [{"type": "function", "function": {"name": "read_file"}}] if tools else []
    return ModelRequest(messages=messages, tools=schema)


# -- the shipped suite -------------------------------------------------------------------------


def test_the_shipped_suite_passes() -> None:
    cases, broken = load_cases([SUITE])
    assert broken == [] and len(cases) >= 30
    report = asyncio.run(run_suite([SUITE]))
    failed = {c.name: c.reasons for c in report.cases if not c.passed}
    assert failed == {}
    assert {m.intent for m in report.intents} >= {"notes", "repo", "code", "research", "drafting", "metrics"}


def cases_claiming(detector: str) -> set[str]:
    """Cases that claim a detector's work: it is among their expected detectors, or the only
    acceptable stop reason."""
    names = set()
    for case in load_cases(CORE)[0]:
        stop = case.expect.expected_stop_reason
        if detector in case.expect.expected_detectors or stop in (detector, [detector]):
            names.add(case.name)
    return names


def cycle_cases() -> set[str]:
    return cases_claiming("cycle")


@pytest.mark.parametrize("detector", ["repeated_call", "error_loop", "no_progress", "repetition", "monologue"])
def test_every_detector_has_cases_that_fail_without_it(detector: str) -> None:
    claimed = cases_claiming(detector)
    assert claimed, f"no shipped case claims {detector}"
    report = asyncio.run(run_suite(CORE, disabled=[detector]))
    failed = {c.name for c in report.cases if not c.passed}
    assert claimed <= failed


def test_disabling_the_cycle_detector_flips_exactly_the_cycle_cases_and_exits_nonzero(tmp_path: Path) -> None:
    app, cli = build_app(), CliRunner()
    baseline = tmp_path / "baseline.json"
    first = cli.invoke(app, ["eval", *map(str, CORE), "--save", str(baseline)])
    assert first.exit_code == 0, first.output

    same = cli.invoke(app, ["eval", *map(str, CORE), "--baseline", str(baseline), "--json"])
    assert same.exit_code == 0
    assert json.loads(same.stdout)["diff"] == []
    assert json.loads(same.stdout)["metric_deltas"] == []  # the suite is deterministic

    broken = cli.invoke(app, ["eval", *map(str, CORE), "--baseline", str(baseline), "--disable", "cycle", "--json"])
    assert broken.exit_code == 1
    payload = json.loads(broken.stdout)
    diff = payload["diff"]
    moved = {(d["intent"], d["metric"]) for d in payload["metric_deltas"]}
    assert ("research", "avg_tool_rounds") in moved  # cycles now run on until another guard stops them
    flipped = [d["name"] for d in diff if d["change"] == "regressed"]
    expected = cycle_cases()
    assert len(expected) >= 4
    assert set(flipped) == expected
    assert [d["change"] for d in diff][: len(flipped)] == ["regressed"] * len(flipped)  # regressions first
    assert all(d["before"] == "pass" and d["after"] == "fail" and d["reasons"] for d in diff[: len(flipped)])

    table = cli.invoke(app, ["eval", *map(str, CORE), "--baseline", str(baseline), "--disable", "cycle"])
    assert table.exit_code == 1
    assert all(name in table.output for name in expected)


# -- case files --------------------------------------------------------------------------------


def test_a_broken_case_file_is_a_failed_case_named_after_the_file(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    (tmp_path / "no-model.yaml").write_text("input: go\n")
    write_case(tmp_path, "fine", model={"script": [{"text": "done"}]})
    report = asyncio.run(run_suite([tmp_path]))
    by_name = {c.name: c for c in report.cases}
    assert by_name["fine"].passed
    assert not by_name["broken"].passed and "broken.yaml" in by_name["broken"].reasons[0]
    assert not by_name["no-model"].passed and "model" in by_name["no-model"].reasons[0]
    result = CliRunner().invoke(build_app(), ["eval", str(tmp_path)])
    assert result.exit_code == 1


def test_a_case_file_must_be_a_mapping_and_names_must_be_unique(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(CaseError, match="mapping"):
        load_case(tmp_path / "list.yaml")
    write_case(tmp_path, "a", model={"script": [{"text": "x"}]})
    (tmp_path / "b.yaml").write_text((tmp_path / "a.yaml").read_text())
    with pytest.raises(CaseError, match="unique"):
        load_cases([tmp_path / "a.yaml", tmp_path / "b.yaml"])


def test_the_model_needs_exactly_one_behaviour_and_steps_one_kind() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ModelSpec.model_validate({"script": [{"text": "x"}], "repeat_forever": {"call": "a"}})
    with pytest.raises(ValueError, match="exactly one"):
        ModelSpec.model_validate({})
    with pytest.raises(ValueError, match="one of"):
        ModelSpec.model_validate({"script": [{"call": "a", "error": "timeout"}]})


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    app, cli = build_app(), CliRunner()
    assert cli.invoke(app, ["eval", str(tmp_path / "missing")]).exit_code == 2
    write_case(tmp_path, "x", model={"script": [{"text": "x"}]})
    assert cli.invoke(app, ["eval", str(tmp_path), "--disable", "no_such_detector"]).exit_code == 2


# -- the scripted case model -------------------------------------------------------------------


async def test_repeat_forever_keeps_calling_until_asked_to_answer() -> None:
    model = CaseModel(ModelSpec.model_validate({"repeat_forever": {"call": "read_file", "args": {"path": "a"}}}))
    for _ in range(5):
        reply = await model.complete(request())
        assert reply.tool_calls[0].name == "read_file"
    narrowed = await model.complete(request(tools=False, last="tool"))
    assert narrowed.tool_calls, "with tools merely narrowed away, a collapsed model goes on calling"
    answer = await model.complete(request(tools=False, last="user"))
    assert answer.text == model.spec.final and not answer.tool_calls


async def test_cycle_then_nudge_switches_script_once() -> None:
    spec = ModelSpec.model_validate(
        {"cycle": [{"call": "a"}, {"call": "b"}], "on_nudge": [{"call": "c"}], "then": "repeat_last"}
    )
    model = CaseModel(spec)
    names = [(await model.complete(request(users=1))).tool_calls[0].name for _ in range(3)]
    assert names == ["a", "b", "a"]
    after_nudge = [(await model.complete(request(users=2))).tool_calls[0].name for _ in range(2)]
    assert after_nudge == ["c", "c"]
    again = await model.complete(request(users=3))  # a second nudge does not restart the script
    assert again.tool_calls[0].name == "c"


async def test_scripted_errors_and_exhaustion_are_model_errors() -> None:
    model = CaseModel(ModelSpec.model_validate({"script": [{"error": "rate_limited"}], "then": "exhausted"}))
    with pytest.raises(ModelError) as failed:
        await model.complete(request())
    assert failed.value.kind == "rate_limited" and failed.value.retryable
    with pytest.raises(ModelError) as exhausted:
        await model.complete(request())
    assert exhausted.value.kind == "script_exhausted"


async def test_usage_grows_with_the_conversation() -> None:
    model = CaseModel(ModelSpec.model_validate({"repeat_forever": {"call": "a"}}))
    short = await model.complete(request(users=1))
    long = await model.complete(request(users=20))
    assert long.usage.prompt_tokens > short.usage.prompt_tokens


# -- case tools --------------------------------------------------------------------------------


async def test_case_tools_answer_by_arguments_per_call_and_by_script() -> None:
    by_args = build_tool(ToolSpec.model_validate(READ_FILE))
    args = by_args.args_model.model_validate({"path": "b.txt"})
    assert by_args.to_result(await by_args.call(args)).data == "beta"

    per_call = build_tool(ToolSpec.model_validate({"name": "poll", "results": [{"data": 1}, {"data": 2}]}))
    empty = per_call.args_model.model_validate({})
    assert [per_call.to_result(await per_call.call(empty)).data for _ in range(4)] == [1, 2, 2, 2]

    script = build_tool(
        ToolSpec.model_validate({"name": "s", "script": "def run(args, n):\n    return args['x'] * n\n"})
    )
    x = script.args_model.model_validate({"x": 3})
    assert [await script.call(x) for _ in range(3)] == [3, 6, 9]


async def test_case_tools_report_failures_as_structured_results() -> None:
    spec = {"name": "push", "results": [{"ok": False, "error_type": "exit_128", "message": "fatal"}]}
    push = build_tool(ToolSpec.model_validate(spec))
    result = push.to_result(await push.call(push.args_model.model_validate({})))
    assert (result.ok, result.error_type, result.message) == (False, "exit_128", "fatal")
    business = build_tool(
        ToolSpec.model_validate({"name": "o", "results": [{"data": {"success": False, "code": "Q"}}]})
    )
    parsed = business.to_result(await business.call(business.args_model.model_validate({})))
    assert not parsed.ok and parsed.error_type == "Q"  # a failure returned as data is still a failure


def test_case_tool_schema_is_what_the_model_sees_and_is_enforced() -> None:
    read = build_tool(ToolSpec.model_validate(READ_FILE))
    assert read.openai_schema()["function"]["parameters"] == READ_FILE["parameters"]
    with pytest.raises(ValueError, match="path"):
        read.args_model.model_validate({"file": "a.txt"})


# -- expectations ------------------------------------------------------------------------------


async def test_each_expectation_fails_with_a_reason_when_violated() -> None:
    collapse = {"repeat_forever": {"call": "read_file", "args": {"path": "a.txt"}}}
    case = make_case(
        model=collapse,
        checklist=[{"name": "read_b", "tool": "read_file", "when_args": {"path": "b.txt"}}],
        expect={
            "expected_stop_reason": "final_answer",
            "expected_status": "completed",
            "max_model_calls": 2,
            "expected_tools": ["write_file"],
            "must_complete": True,
            "no_guard_trip": True,
            "expected_detectors": ["cycle"],
            "output_contains": ["beta"],
        },
    )
    result = await run_case(case)
    assert not result.passed
    text = "\n".join(result.reasons)
    for fragment in (
        "stop reason 'repeated_call'",
        "status 'degraded'",
        "model calls, at most 2",
        "never ran: ['write_file']",
        "not done: ['read_b']",
        "the guard stepped in",
        "never stepped in: ['cycle']",
        "output lacks ['beta']",
    ):
        assert fragment in text
    assert len(result.reasons) == 8


async def test_forbidden_repeats_counts_executions_not_proposals() -> None:
    twice = {"script": [{"call": "read_file", "args": {"path": "a.txt"}}] * 2 + [{"text": "done"}]}
    cached = await run_case(make_case(model=twice, expect={"forbidden_repeats": True}))
    assert cached.passed and cached.duplicate_proposals == 1  # the second was answered from the cache

    poll = dict(READ_FILE, repeatable=True)
    polled = await run_case(make_case(tools=[poll], model=twice, expect={"forbidden_repeats": ["read_file"]}))
    assert not polled.passed and "read_file x2" in polled.reasons[0]


async def test_a_case_that_crashes_the_runtime_fails_without_stopping_the_others() -> None:
    bad = make_case(name="bad", verifiers=["no_such_verifier"], model={"script": [{"text": "x"}]})
    good = make_case(name="good", model={"script": [{"text": "x"}]})
    results = await run_cases([bad, good])
    assert [r.name for r in results] == ["bad", "good"]
    assert not results[0].passed and results[0].reasons[0].startswith("crashed: ValueError")
    assert results[1].passed


async def test_cases_run_concurrently_up_to_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    in_flight, peak = 0, 0
    all_started = asyncio.Event()

    async def tracked(case: Case, disabled: Any = (), **_: Any) -> CaseResult:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if peak == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), 5)  # only returns if 3 ran at once
        in_flight -= 1
        return CaseResult(name=case.name, intent=case.intent, passed=True)

    monkeypatch.setattr(runner_module, "run_case", tracked)
    cases = [make_case(name=f"c{i}", model={"script": [{"text": "x"}]}) for i in range(6)]
    results = await run_cases(cases, concurrency=3)
    assert [r.name for r in results] == [f"c{i}" for i in range(6)]
    assert peak == 3


# -- metrics and diff --------------------------------------------------------------------------


def result(name: str, passed: bool = True, **fields: Any) -> CaseResult:
    return CaseResult(name=name, intent=fields.pop("intent", "i"), passed=passed, **fields)


def test_intent_metrics() -> None:
    results = [
        result("a", tool_rounds=2, proposals=2, duplicate_proposals=0, candidates=[4, 4], completed=True),
        result("b", tool_rounds=5, proposals=5, duplicate_proposals=4, candidates=[4, 1], fallback=True),
        result("c", passed=False, tool_rounds=20, proposals=3, duplicate_proposals=1, stop_reason="tool_round_budget"),
    ]
    m = intent_metrics("i", results)
    assert (m.cases, m.passed) == (3, 2)
    assert m.avg_tool_rounds == pytest.approx(9.0)
    assert m.p95_tool_rounds == 20
    assert m.duplicate_call_rate == pytest.approx(5 / 10)
    assert m.avg_candidates == pytest.approx(13 / 4)
    assert m.completion_rate == pytest.approx(1 / 3) and m.fallback_rate == pytest.approx(1 / 3)
    assert m.stop_reasons == {"": 2, "tool_round_budget": 1}


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=200), st.floats(0, 100))
def test_percentile_is_an_observed_value_within_range(values: list[int], q: float) -> None:
    p = percentile(values, q)
    assert p in values
    assert min(values) <= p <= max(values)
    assert percentile(values, 100) == max(values)


def test_the_diff_lists_regressions_first_then_fixes_new_and_not_run() -> None:
    before = [result("steady"), result("breaks"), result("heals", passed=False, reasons=["old"]), result("gone")]
    after = [
        result("steady"),
        result("breaks", passed=False, reasons=["now broken"]),
        result("heals"),
        result("added"),
    ]
    diffs = diff_results(before, after)
    assert [(d.name, d.change) for d in diffs] == [
        ("breaks", "regressed"),
        ("heals", "fixed"),
        ("added", "new"),
        ("gone", "not_run"),
        ("steady", "unchanged"),
    ]
    assert diffs[0].reasons == ["now broken"] and diffs[1].reasons == ["old"]
    assert [d.name for d in regressions(diffs)] == ["breaks"]


def test_traces_option_keeps_each_case_run_as_jsonl(tmp_path: Path) -> None:
    from loopwarden.events import RunFinished
    from loopwarden.trace.jsonl import read_jsonl

    cases = tmp_path / "cases"
    cases.mkdir()
    write_case(cases, "loops", model={"repeat_forever": {"call": "read_file", "args": {"path": "a.txt"}}})
    write_case(cases, "answers", model={"script": [{"text": "done"}]})
    traces = tmp_path / "traces"
    result = CliRunner().invoke(build_app(), ["eval", str(cases), "--traces", str(traces), "--json"])
    report = json.loads(result.stdout)
    assert sorted(p.name for p in traces.iterdir()) == ["answers.jsonl", "loops.jsonl"]
    for case in report["cases"]:
        events = read_jsonl(traces / f"{case['name']}.jsonl")
        assert isinstance(events[-1], RunFinished)
        assert events[-1].stop_reason == case["stop_reason"]
        assert events[-1].totals.model_calls == case["model_calls"]


@given(
    st.dictionaries(st.sampled_from("abcdefgh"), st.booleans(), max_size=8),
    st.dictionaries(st.sampled_from("abcdefgh"), st.booleans(), max_size=8),
)
def test_the_diff_flags_exactly_the_pass_to_fail_flips(before: dict[str, bool], after: dict[str, bool]) -> None:
    diffs = diff_results(
        [result(n, passed=p) for n, p in before.items()], [result(n, passed=p) for n, p in after.items()]
    )
    assert sorted(d.name for d in diffs) == sorted(set(before) | set(after))
    flipped = {n for n in before if before[n] and after.get(n) is False}
    assert {d.name for d in regressions(diffs)} == flipped
    changes = [d.change for d in diffs]
    assert changes == sorted(changes, key=["regressed", "fixed", "new", "not_run", "unchanged"].index)


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "read_file", "arguments": {"path": "b.txt"}}</tool_call>',
        '<｜DSML｜function_calls><｜DSML｜invoke name="read_file">',
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file",
        '{"name": "read_file", "arguments": {"path": "a.txt"}}',
    ],
)
def test_no_markup_rejects_leaked_tool_calls(text: str) -> None:
    from loopwarden.eval.verifiers import no_markup

    assert no_markup(f"Results: {text}") is not None
    assert no_markup("Flow rose linearly; the <b>peak</b> was 12.4 L/min (see table 2).") is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # file I/O on a loaded machine
@given(st.dictionaries(st.sampled_from(["name", "input", "tools", "model", "expect", "checklist", "x"]), _json))
def test_any_yaml_mapping_loads_or_fails_with_a_case_error(data: dict[str, Any]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "case.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        try:
            case = load_case(path)
        except CaseError as error:
            assert "case.yaml" in str(error)
        else:
            assert case.path == path


def test_the_readme_case_example_is_a_valid_case(tmp_path: Path) -> None:
    readme = (SUITE.parent / "README.md").read_text(encoding="utf-8")
    example = readme.split("A case is one YAML file:", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.yaml"
    path.write_text(example, encoding="utf-8")
    case = load_case(path)
    result = asyncio.run(run_case(case))
    assert result.passed, result.reasons
