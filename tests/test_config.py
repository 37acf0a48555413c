"""config.check_config: every setting an application hands over is checked once, where an Agent or
an adapter takes it, and a wrong one stops the set-up with its name."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from loopwarden import Agent, Budgets, Ladder, LoopConfig, ScriptedModel, call, tool
from loopwarden.config import check_config
from loopwarden.errors import ConfigError
from loopwarden.retry import RetryPolicy


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"text of {path}"


BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"budgets": Budgets(max_tool_rounds=-1)},
        "budgets.max_tool_rounds must be a whole number >= 0 or None, not -1",
    ),
    ({"budgets": Budgets(max_model_calls=2.5)}, "config.budgets.max_model_calls"),  # type: ignore[arg-type]
    ({"budgets": Budgets(max_tokens=True)}, "config.budgets.max_tokens"),
    ({"budgets": Budgets(max_seconds=-0.5)}, "config.budgets.max_seconds must be a number >= 0 or None, not -0.5"),
    ({"budgets": Budgets(max_cost=math.nan)}, "config.budgets.max_cost"),
    ({"budgets": Budgets(max_cost="1")}, "config.budgets.max_cost"),  # type: ignore[arg-type]
    ({"budgets": 3}, "config.budgets must be a Budgets, not int"),
    ({"ladder": Ladder(nudge_at=0)}, "config.ladder.nudge_at must be a whole number >= 1, not 0"),
    ({"ladder": Ladder(stop_at=None)}, "config.ladder.stop_at"),  # type: ignore[arg-type]
    ({"ladder": (3, 4, 5)}, "config.ladder must be a Ladder, not tuple"),
    ({"policy": "retry"}, "config.policy must be one of degrade, fail, handoff, not 'retry'"),
    ({"max_verify_retries": -1}, "config.max_verify_retries"),
    ({"max_parallel_tools": 0}, "config.max_parallel_tools must be a whole number >= 1, not 0"),
    ({"tool_timeout": 0}, "config.tool_timeout must be a number > 0 or None, not 0"),
    ({"tool_timeout": -1.0}, "config.tool_timeout"),
    ({"max_output_tokens": 0}, "config.max_output_tokens"),
    ({"retry": RetryPolicy(max_attempts=0)}, "config.retry.max_attempts must be a whole number >= 1, not 0"),
    ({"retry": RetryPolicy(base_delay=-1)}, "config.retry.base_delay"),
    ({"retry": RetryPolicy(max_elapsed=-2)}, "config.retry.max_elapsed"),
    ({"retry": None}, "config.retry must be a RetryPolicy, not NoneType"),
    ({"disabled_detectors": "cycle"}, "config.disabled_detectors must be a set of detector names"),
    ({"disabled_detectors": frozenset({1})}, "config.disabled_detectors"),
    ({"disabled_detectors": 3}, "config.disabled_detectors"),
]


@pytest.mark.parametrize(("settings", "message"), BAD)
def test_a_wrong_setting_is_refused_with_its_name(settings: dict[str, Any], message: str) -> None:
    config = LoopConfig(**settings)
    with pytest.raises(ConfigError) as refused:
        check_config(config)
    assert message in str(refused.value)
    with pytest.raises(ConfigError, match=re.escape(message)):  # the Agent refuses it when made
        Agent(ScriptedModel([]), [read], config=config, trace=False)


def test_a_config_that_is_not_a_loopconfig_is_refused() -> None:
    with pytest.raises(ConfigError, match="config must be a LoopConfig, not dict"):
        Agent(ScriptedModel([]), [read], config={"policy": "fail"}, trace=False)  # type: ignore[arg-type]


def test_the_limits_of_what_is_accepted() -> None:
    for config in (
        LoopConfig(),
        LoopConfig(budgets=Budgets(max_tool_rounds=0, max_model_calls=None, max_seconds=0, max_cost=0.0)),
        LoopConfig(ladder=Ladder(nudge_at=9, narrow_at=9, stop_at=2)),  # stop without steering first
        LoopConfig(tool_timeout=None, max_output_tokens=1, max_verify_retries=0, max_parallel_tools=1),
        LoopConfig(retry=RetryPolicy(max_attempts=1, base_delay=0, max_delay=0, max_elapsed=0.0)),
        LoopConfig(budgets=Budgets(max_seconds=math.inf), disabled_detectors=frozenset({"cycle", "monologue"})),
    ):
        check_config(config)


def test_a_zero_tool_round_budget_is_a_run_that_answers_without_tools() -> None:
    # Accepted because it means something: the model's first call meets the spent budget, and
    # the wrap-up asks for an answer from what there is.
    model = ScriptedModel([call("read", {"path": "a"}), "done"])
    agent = Agent(model, [read], config=LoopConfig(budgets=Budgets(max_tool_rounds=0)), trace=False)
    result = agent.run_sync("read a")
    assert (result.stop_reason, result.status, result.output) == ("tool_round_budget", "degraded", "done")
    assert not [e for e in result.events if type(e).__name__.startswith("Tool")]  # nothing ran


def test_an_adapter_refuses_a_wrong_config_when_it_is_made() -> None:
    from loopwarden.adapters.openai_agents import LoopwardenGuard

    with pytest.raises(ConfigError, match=r"config\.max_parallel_tools"):
        LoopwardenGuard(LoopConfig(max_parallel_tools=0))


def test_plain_and_near_miss_settings_are_accepted_and_wrong_ones_refused() -> None:
    """Edge values of every setting's plain type pass; a subclass of int, and the disabled detectors
    as a list or set, pass too; a bool for a number, a NaN, and the wrong settings above do not."""

    class Count(int):
        pass

    accepted = [
        LoopConfig(),
        LoopConfig(budgets=Budgets(max_tool_rounds=0, max_model_calls=None, max_seconds=0, max_cost=0.0)),
        LoopConfig(ladder=Ladder(nudge_at=9, narrow_at=9, stop_at=1), policy="handoff"),
        LoopConfig(tool_timeout=None, max_output_tokens=1, max_verify_retries=0, max_parallel_tools=1),
        LoopConfig(retry=RetryPolicy(max_attempts=1, base_delay=0, max_delay=0, max_elapsed=0.0), tool_timeout=1),
        LoopConfig(budgets=Budgets(max_seconds=math.inf, max_tokens=10), disabled_detectors=frozenset({"cycle"})),
        LoopConfig(budgets=Budgets(max_tool_rounds=Count(3))),
        LoopConfig(max_parallel_tools=Count(2)),
        LoopConfig(disabled_detectors=["cycle"]),  # type: ignore[arg-type]
        LoopConfig(disabled_detectors={"cycle"}),  # type: ignore[arg-type]
    ]
    for config in accepted:
        check_config(config)
    for settings, _ in BAD:
        with pytest.raises(ConfigError):
            check_config(LoopConfig(**settings))
    for bad in ({"max_output_tokens": False}, {"tool_timeout": math.nan}, {"retry": RetryPolicy(max_delay=True)}):
        with pytest.raises(ConfigError):
            check_config(LoopConfig(**bad))
