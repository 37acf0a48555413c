"""Verifiers (verify.py): leaked tool-call markup is rejected and retried with no tools;
predicate and schema verifiers; the retry limit."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from loopwarden import Agent, LoopConfig, ScriptedModel, call, tool
from loopwarden.events import GuardVerdict
from loopwarden.verify import no_tool_markup, predicate, schema

DSML_LEAK = (
    'Let me read it.\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="read_file">\n'
    '<｜DSML｜parameter name="path" string="true">a.txt</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
)
LEGACY_LEAK = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file\n"
    '```json\n{"path": "a.txt"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
HERMES_LEAK = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>'
JSON_LEAK = json.dumps(
    {"tool_calls": [{"type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]}
)


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "alpha"


def test_a_dsml_leak_is_rejected_then_a_valid_retry_accepted() -> None:
    model = ScriptedModel([call("read_file", {"path": "a.txt"}), DSML_LEAK, "The file says alpha."])
    result = Agent(model, [read_file], verifiers=[no_tool_markup]).run_sync("what is in a.txt?")
    assert result.status == "completed" and result.output == "The file says alpha."
    [verdict] = [e for e in result.events if isinstance(e, GuardVerdict) and e.detector == "verifier"]
    assert verdict.action == "refused" and "DSML" in verdict.reason
    retry = model.requests[2]
    assert retry.tools == [] and retry.tool_choice is None  # the retry offers no tools
    assert retry.messages[-2] == {"role": "assistant", "content": DSML_LEAK}
    assert "not accepted" in retry.messages[-1]["content"] and "DSML" in retry.messages[-1]["content"]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (DSML_LEAK, "DSML"),
        (DSML_LEAK.replace("｜", "|"), "DSML"),
        (LEGACY_LEAK, "tool▁calls▁begin"),
        (HERMES_LEAK, "<tool_call>"),
        (JSON_LEAK, "tool_calls JSON"),
        (f"```json\n{JSON_LEAK}\n```", "tool_calls JSON"),
    ],
)
def test_every_known_leak_family_is_rejected(text: str, named: str) -> None:
    problem = no_tool_markup(text)
    assert problem is not None and named in problem


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        "The API returns a `tool_calls` list when the model calls a function.",
        'Example response:\n```json\n{"id": "x", "choices": [{"message": {"tool_calls": []}}]}\n```\nThat is all.',
        "Use a pipe | and a bar ｜ in text; DSML stands for a markup language.",
    ],
)
def test_ordinary_answers_pass(text: str) -> None:
    assert no_tool_markup(text) is None


def test_a_run_that_never_passes_fails_after_the_retry_limit() -> None:
    model = ScriptedModel([HERMES_LEAK] * 4)
    result = Agent(model, [read_file], verifiers=[no_tool_markup], config=LoopConfig(max_verify_retries=3)).run_sync(
        "x"
    )
    assert result.status == "failed" and result.stop_reason == "verifier_failed"
    assert model.calls == 4  # the answer and three retries


class Answer(BaseModel):
    flow_l_min: float
    unit: str


def test_a_schema_verifier_names_the_wrong_field_and_accepts_the_fix() -> None:
    model = ScriptedModel(
        ['{"flow_l_min": "a lot", "unit": "L/min"}', '```json\n{"flow_l_min": 12.4, "unit": "L/min"}\n```']
    )
    result = Agent(model, [read_file], verifiers=[schema(Answer)]).run_sync("peak flow as JSON")
    assert result.status == "completed"
    assert Answer.model_validate_json(result.output.split("```json")[1].split("```")[0]).flow_l_min == 12.4
    assert "flow_l_min" in model.requests[1].messages[-1]["content"]


def test_a_predicate_verifier_and_a_check_that_raises() -> None:
    has_percent = predicate(lambda text: "%" in text, "give the share as a percentage")
    assert has_percent("about 40 %") is None
    assert has_percent("about half") == "give the share as a percentage"
    broken = predicate(lambda text: 1 / 0 > 0, "must parse")
    assert (broken("x") or "").startswith("must parse (the check raised ZeroDivisionError")
