"""How a run is guarded: the ladder, the budgets, the stop policy and the executor's limits."""

from __future__ import annotations

from dataclasses import dataclass, field

from .events import StopPolicy
from .executor import RetryPolicy
from .frozen import quick_init
from .guard.budget import Budgets
from .guard.ladder import Ladder

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
