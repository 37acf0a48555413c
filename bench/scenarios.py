"""Collapse scenarios shared by every framework in the benchmark.

A scenario is a scripted model policy (what the "model" does at each call), the tools it
works with, and the task's checklist. The policy sees only what any framework can give it:
the 1-based index of this model call, whether tools are offered, and whether the runtime has
steered it (a message from the runtime after the task began; only loopwarden does that). The
tools are plain Python functions; each run gets a fresh `World` that logs what really ran.

Tokens are metered identically for every framework: input tokens = characters of what the
framework actually sent that a model reads (system prompt, history: roles, text, tool names and
arguments; not ids or timestamps) / 4, output = 20 per call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OUTPUT_TOKENS = 20
MEASUREMENT_CAP = 300
"""Model calls after which the benchmark itself ends a run that its framework has not stopped
(reported as ">= cap": the framework would have gone on)."""


class CapReached(Exception):
    """Raised by the scripted model at the measurement cap."""


@dataclass(frozen=True)
class Call:
    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    text: str


Decision = Call | Answer
Policy = Callable[[int, int | None], Decision]
"""(call index, calls since the runtime first steered it or None) -> what the model does when
tools are offered."""


@dataclass
class World:
    """The tools' side of one run: what was executed, in order."""

    executed: list[tuple[str, str]] = field(default_factory=list)

    def log(self, tool: str, args: dict[str, Any]) -> None:
        self.executed.append((tool, json.dumps(args, sort_keys=True)))

    def read_file(self, path: str) -> str:
        self.log("read_file", {"path": path})
        notes = {"a.txt": "The pump was run at 3 speeds; flow rose linearly.", "b.txt": "Peak flow: 12.4 L/min."}
        return notes.get(path, f"no such file: {path}")

    def search(self, query: str) -> str:
        self.log("search", {"query": query})
        if "ethanol" in query:
            return json.dumps({"hits": [{"id": "doc-7", "title": "Ethanol vapour pressure"}]})
        return json.dumps({"hits": [], "total": 0})

    def open_document(self, doc_id: str) -> str:
        self.log("open_document", {"doc_id": doc_id})
        return "Ethanol boils at about 63 C at 0.5 atm."

    def run_command(self, command: str) -> str:
        self.log("run_command", {"command": command})
        # A failure returned as data: what many real tool wrappers do.
        return json.dumps({"ok": False, "error": "exit_128", "message": "fatal: no upstream branch"})


TOOL_NAMES = ("read_file", "search", "open_document", "run_command")


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    prompt: str
    tools: tuple[str, ...]
    policy: Policy
    onset: int | None
    """The model call at which the loop begins (the first call that repeats earlier work); None
    for a healthy task, where nothing is waste."""
    checklist: tuple[tuple[str, dict[str, Any]], ...]
    """(tool, args) that must have run for the task to count as done."""
    metered: bool = True
    """Whether the model counts the tokens it is sent (the waste benchmark) or not (overhead)."""
    min_cap: int = 0
    """Model calls a run may make before the benchmark ends it, at least (a long healthy run)."""

    def completed(self, world: World) -> bool:
        ran = set(world.executed)
        return all((tool, json.dumps(args, sort_keys=True)) in ran for tool, args in self.checklist)


def _total_collapse(i: int, since_steer: int | None) -> Decision:
    return Call("read_file", {"path": "a.txt"})


def _nudge_fixes(i: int, since_steer: int | None) -> Decision:
    if since_steer is None:
        return Call("read_file", {"path": "a.txt"})
    return Call("read_file", {"path": "b.txt"}) if since_steer == 0 else Answer("Peak flow 12.4 L/min.")


def _ab_cycle(i: int, since_steer: int | None) -> Decision:
    if i % 2:
        return Call("search", {"query": "ethanol boiling point 0.5 atm"})
    return Call("open_document", {"doc_id": "doc-7"})


def _error_loop(i: int, since_steer: int | None) -> Decision:
    return Call("run_command", {"command": "git push"})


_QUERIES = [
    "P-7 maintenance report 2019",
    "pump P-7 maintenance 2019",
    "P7 pump service report",
    "maintenance log P-7 2019",
    "2019 report pump P-7",
    "P-7 servicing 2019",
    "pump 7 maintenance record",
    "P-7 annual maintenance",
]


def _stagnation(i: int, since_steer: int | None) -> Decision:
    return Call("search", {"query": f"{_QUERIES[(i - 1) % len(_QUERIES)]} v{(i - 1) // len(_QUERIES)}"})


LONG_TASK_PARTS = 14


def _long_healthy(i: int, since_steer: int | None) -> Decision:
    return Call("read_file", {"path": f"part-{i}.txt"}) if i <= LONG_TASK_PARTS else Answer("All parts read.")


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "total_collapse",
        "Total collapse: the same read forever",
        "Summarise a.txt and b.txt.",
        ("read_file",),
        _total_collapse,
        onset=2,
        checklist=(("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})),
    ),
    Scenario(
        "partial_collapse",
        "Partial collapse a nudge would fix",
        "Summarise a.txt and b.txt.",
        ("read_file",),
        _nudge_fixes,
        onset=2,
        checklist=(("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})),
    ),
    Scenario(
        "ab_cycle",
        "A-B cycle: search, open, search, open...",
        "What is the boiling point of ethanol at 0.5 atm?",
        ("search", "open_document"),
        _ab_cycle,
        onset=3,
        checklist=(("search", {"query": "ethanol boiling point 0.5 atm"}), ("open_document", {"doc_id": "doc-7"})),
    ),
    Scenario(
        "error_loop",
        "Error loop: `git push` fails with exit 128, again",
        "Push my branch.",
        ("run_command",),
        _error_loop,
        onset=2,
        checklist=(("run_command", {"command": "git push"}),),
    ),
    Scenario(
        "stagnation",
        "Stagnation: rephrased searches, same empty result",
        "Find the 2019 maintenance report for pump P-7.",
        ("search",),
        _stagnation,
        onset=4,
        checklist=(("search", {"query": "P-7 maintenance report 2019 v0"}),),
    ),
    Scenario(
        "long_healthy",
        f"No loop: a healthy task of {LONG_TASK_PARTS} distinct reads",
        "Read every part of the manual and summarise it.",
        ("read_file",),
        _long_healthy,
        onset=None,
        checklist=tuple(("read_file", {"path": f"part-{i}.txt"}) for i in range(1, LONG_TASK_PARTS + 1)),
    ),
)


@dataclass
class Meter:
    """The scripted model's own log: one entry per model call, tokens metered the same way for
    every framework."""

    scenario: Scenario
    input_tokens: list[int] = field(default_factory=list)
    steered_at: int | None = None

    def decide(self, *, prompt_chars: Callable[[], int], tools_offered: bool, steered: bool = False) -> Decision:
        """`prompt_chars` measures what the framework sent; called only for a metered scenario
        (it reads the whole history: the overhead benchmark keeps its model's cost flat)."""
        cap = max(MEASUREMENT_CAP, self.scenario.min_cap)
        if self.calls >= cap:
            raise CapReached(f"{cap} model calls and the framework has not stopped")
        self.input_tokens.append(prompt_chars() // 4 if self.scenario.metered else 0)
        if not tools_offered:
            return Answer("Here is what I found so far.")
        if steered and self.steered_at is None:
            self.steered_at = self.calls
        since = None if self.steered_at is None else self.calls - self.steered_at
        return self.scenario.policy(self.calls, since)

    @property
    def capped(self) -> bool:
        return self.calls >= MEASUREMENT_CAP

    @property
    def calls(self) -> int:
        return len(self.input_tokens)

    def waste(self) -> tuple[int, int]:
        """Model calls and tokens from the onset of the loop to the stop."""
        if self.scenario.onset is None:
            return 0, 0
        after = self.input_tokens[self.scenario.onset - 1 :]
        return len(after), sum(after) + OUTPUT_TOKENS * len(after)


def chars(payload: Any) -> int:
    return len(json.dumps(payload, default=str, ensure_ascii=False))
