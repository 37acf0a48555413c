"""The public surface, v1: one way to say each thing."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

import loopwarden
from loopwarden import Agent, LoopwardenError, Principal, ScriptedModel, call, errors, tool
from loopwarden.events import ToolCallFinished


@tool(roles=["admin"])
def wipe() -> str:
    """Wipe everything."""
    return "wiped"


def test_only_model_and_tools_are_positional() -> None:
    positional = [p.name for p in inspect.signature(Agent).parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == ["model", "tools"]
    with pytest.raises(TypeError):
        Agent(ScriptedModel(["hi"]), [], "a system prompt")  # type: ignore[misc]


def test_principal_is_the_one_way_to_say_who_runs_act_for() -> None:
    assert "principal_roles" not in {f.name for f in fields(Agent)}
    refused = Agent(ScriptedModel([call("wipe"), "no"]), [wipe]).run_sync("wipe it")
    admin = Principal.of("u", ["admin"])
    allowed = Agent(ScriptedModel([call("wipe"), "done"]), [wipe], principal=admin).run_sync("x")
    assert [e.error_type for e in refused.events if isinstance(e, ToolCallFinished)] == ["not_allowed"]
    assert [e.ok for e in allowed.events if isinstance(e, ToolCallFinished)] == [True]


def _exception_classes(module: object) -> list[type[BaseException]]:
    return [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, BaseException)]


def test_every_error_derives_from_one_exported_base_drawn_in_the_docstring() -> None:
    classes = _exception_classes(errors)
    assert len(classes) >= 8
    for cls in classes:
        assert issubclass(cls, LoopwardenError)
        assert cls.__name__ in loopwarden.__all__, cls
        assert cls.__name__ in (errors.__doc__ or ""), cls


def test_application_errors_share_the_base() -> None:
    from loopwarden.report.config import ReportInputError
    from loopwarden.report.templates import TemplateError
    from loopwarden.server.jobs import InvalidRun
    from loopwarden.server.runner import QueueFull
    from loopwarden.server.settings import InsecureBinding
    from loopwarden.server.sse import BadLastEventId
    from loopwarden.server.uploads import UploadRejected

    for cls in (
        ReportInputError,
        TemplateError,
        InvalidRun,
        QueueFull,
        InsecureBinding,
        BadLastEventId,
        UploadRejected,
    ):
        assert issubclass(cls, LoopwardenError), cls


def test_errors_keep_their_old_homes_and_builtin_bases() -> None:
    from loopwarden.eval.case import CaseError
    from loopwarden.models.base import ModelError
    from loopwarden.models.config import ConfigError
    from loopwarden.trace.jsonl import TraceFormatError
    from loopwarden.trace.store import RunNotFound

    assert ModelError is errors.ModelError and CaseError is errors.CaseError
    assert issubclass(ConfigError, ValueError) and issubclass(TraceFormatError, ValueError)
    assert issubclass(RunNotFound, KeyError)
    with pytest.raises(errors.ConfigError, match="unknown detector"):
        Agent(ScriptedModel(["x"]), [], config=loopwarden.LoopConfig(disabled_detectors=frozenset({"nope"}))).run_sync(
            "x"
        )


def test_a_model_request_says_nothing_it_does_not_mean() -> None:
    from loopwarden.models.base import ModelRequest

    assert "tier" not in ModelRequest.model_fields  # the model object is the tier (build_model(config, "main"))
    request = ModelRequest(messages=[], on_text=print)
    assert "on_text" not in request.model_dump() and "on_text" not in request.model_dump_json()


def test_a_cap_on_tool_rounds_has_one_name_everywhere() -> None:
    from dataclasses import fields as dataclass_fields

    from loopwarden import Budgets, Fallback, Intent
    from loopwarden.events import IntentRouted, Totals
    from loopwarden.guard.budget import HARD_BUDGET_REASONS

    for cls in (Budgets, Intent, Fallback):
        names = {f.name for f in dataclass_fields(cls)}
        assert "max_tool_rounds" in names and not {n for n in names if "step" in n}, cls
    assert "max_tool_rounds" in IntentRouted.model_fields and "tool_rounds" in Totals.model_fields
    assert Budgets(max_tool_rounds=2).exhausted(Totals(tool_rounds=2), 0.0) == (
        "tool_round_budget",
        "budget exhausted: 2 of 2 tool rounds used",
    )
    assert "tool_round_budget" not in HARD_BUDGET_REASONS  # a wrap-up answer is still asked for
