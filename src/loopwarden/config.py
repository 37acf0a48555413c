"""How a run is guarded: the ladder, the budgets, the stop policy and the executor's limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ConfigError
from .events import StopPolicy
from .executor import RetryPolicy
from .guard.budget import Budgets
from .guard.ladder import Ladder
from .hotpath.frozen import quick_init

WRAP_UP_NUDGE = (
    "You are repeating a call whose result you already have. Do not call it again: "
    "use what you have gathered, call the finishing tool if there is one, or give your final answer."
)
WRAP_UP_REQUEST = "Stop calling tools now. Using only what you have gathered so far, give your final answer."
NO_CALLS_REQUEST = "You cannot call tools now. Answer in text, from the results above."
ASSEMBLED_MARK = "[No answer from the model: assembled by the runtime from what the tools returned.]"
CHECKLIST_DONE_REQUEST = "Every required step is done. Give your final answer to the user now, from the results above."
CHECKLIST_OPEN_REMINDER = (
    "The task is not done yet. Still to do: {missing}. Do not describe it: call the tool for the next step."
)


@quick_init  # built per run where an agent is made per request (the bench's runs are)
@dataclass(frozen=True)
class LoopConfig:
    ladder: Ladder = field(default_factory=Ladder)
    budgets: Budgets = field(default_factory=Budgets)
    policy: StopPolicy = "degrade"
    wrap_up: bool = True
    """After a stop under `degrade`, ask once (no tools) for an answer from what was gathered."""
    max_verify_retries: int = 3
    max_parallel_tools: int = 4
    tool_timeout: float | None = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    nudge_text: str = WRAP_UP_NUDGE
    phase: str = "tools"
    disabled_detectors: frozenset[str] = frozenset()
    """Names of detectors to switch off ("cycle", "error_loop", "no_progress", "repetition", "monologue")."""
    max_output_tokens: int | None = None
    """The most a model may write per call (`max_tokens`); None = the endpoint's default."""


_POLICIES = ("degrade", "fail", "handoff")
_COUNTS = ("max_tool_rounds", "max_model_calls", "max_tokens")
_AMOUNTS = ("max_seconds", "max_cost")


def check_config(config: object) -> None:
    """Raise `ConfigError` naming the first setting that cannot work. The dataclasses take any
    value (they are built per run, so they do not check themselves); what the application hands
    over is checked once, where an `Agent` or an adapter takes it, so a wrong value stops the
    set-up with its name instead of misbehaving mid-run (a negative budget stopping every run at
    once, a string where a number goes failing at the first comparison)."""
    if not isinstance(config, LoopConfig):
        raise ConfigError(f"config must be a LoopConfig, not {type(config).__name__}")
    ladder, budgets, retry = config.ladder, config.budgets, config.retry
    if not isinstance(ladder, Ladder):
        raise ConfigError(f"config.ladder must be a Ladder, not {type(ladder).__name__}")
    for name in ("nudge_at", "narrow_at", "stop_at"):
        _count(f"config.ladder.{name}", getattr(ladder, name), least=1)
    if not isinstance(budgets, Budgets):
        raise ConfigError(f"config.budgets must be a Budgets, not {type(budgets).__name__}")
    for name in _COUNTS:
        _count(f"config.budgets.{name}", getattr(budgets, name), least=0, optional=True)
    for name in _AMOUNTS:
        _amount(f"config.budgets.{name}", getattr(budgets, name), optional=True)
    if config.policy not in _POLICIES:
        raise ConfigError(f"config.policy must be one of {', '.join(_POLICIES)}, not {config.policy!r}")
    _count("config.max_verify_retries", config.max_verify_retries, least=0)
    _count("config.max_parallel_tools", config.max_parallel_tools, least=1)
    _amount("config.tool_timeout", config.tool_timeout, optional=True, positive=True)
    _count("config.max_output_tokens", config.max_output_tokens, least=1, optional=True)
    if not isinstance(retry, RetryPolicy):
        raise ConfigError(f"config.retry must be a RetryPolicy, not {type(retry).__name__}")
    _count("config.retry.max_attempts", retry.max_attempts, least=1)
    _amount("config.retry.base_delay", retry.base_delay)
    _amount("config.retry.max_delay", retry.max_delay)
    _amount("config.retry.max_elapsed", retry.max_elapsed, optional=True)
    disabled = config.disabled_detectors
    if not isinstance(disabled, set | frozenset | list | tuple) or not all(isinstance(name, str) for name in disabled):
        raise ConfigError("config.disabled_detectors must be a set of detector names, e.g. frozenset({'cycle'})")


def _count(name: str, value: object, *, least: int, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        none = " or None" if optional else ""
        raise ConfigError(f"{name} must be a whole number >= {least}{none}, not {value!r}")


def _amount(name: str, value: object, *, optional: bool = False, positive: bool = False) -> None:
    if value is None and optional:
        return
    # NaN fails both comparisons, so it is refused with the rest.
    if not isinstance(value, bool) and isinstance(value, int | float) and (value > 0 if positive else value >= 0):
        return
    bound = "> 0" if positive else ">= 0"
    none = " or None" if optional else ""
    raise ConfigError(f"{name} must be a number {bound}{none}, not {value!r}")
