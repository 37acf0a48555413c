"""Five ways agents circle without repeating one exact call, each caught by its own detector,
next to healthy work that trips none of them.

    python -m loopwarden.examples.loops

Every model is scripted (no network, no key); the tools are real functions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from .. import Agent, Budgets, ChecklistItem, LoopConfig, ModelReply, ScriptedModel, ToolResult, call, tool
from ..events import GuardVerdict
from ..models.scripted import ReplyLike

PAGES = {f"p{i}": f"page {i}: the pump flow at speed {i} is {1.2 * i:.1f} L/min" for i in range(1, 9)}
STATUS = "On branch main\nnothing to commit, working tree clean"


@tool
def read_page(name: str) -> str:
    """Read one page of the lab notes."""
    return PAGES[name]


@tool
def run(command: str) -> ToolResult | str:
    """Run a command in the project (a tiny fake shell: git status and cat)."""
    if command.startswith("git") and "status" in command:
        return STATUS
    if command.startswith("cat "):
        return ToolResult.failure("exit_1", f"cat: {command[4:]}: No such file or directory")
    return ToolResult.failure("exit_127", f"{command.split()[0]}: command not found")


@dataclass
class Case:
    title: str
    script: list[ReplyLike]
    expect: str
    checklist: tuple[ChecklistItem, ...] = ()


def cases() -> list[Case]:
    chant = "I will now mark the task as complete."
    talk = ["I will read page 1 now.", "Reading page 1 next.", "Let me get page 1.", "About to read it.", "Now."]
    statuses = ["git status", "git --no-pager status", "git status --long", "git -C . status", "git status ."]
    statuses += ["git -c color.ui=never status", "git status --untracked-files=normal"]
    return [
        Case("cycle A-B-C", [call("read_page", {"name": f"p{1 + i % 3}"}) for i in range(20)], "cycle"),
        Case("error loop", [call("run", {"command": f"cat notes-{i}.txt"}) for i in range(8)], "error_loop"),
        Case("no progress", [call("run", {"command": c}) for c in statuses], "no_progress"),
        Case("chanting", [" ".join([chant] * 15)] * 4, "repetition"),
        Case("monologue", list(talk), "monologue", (ChecklistItem("page 1 read", "read_page"),)),
        Case(
            "healthy",
            [
                *(ModelReply(text=f"Reading {p}.", tool_calls=[call("read_page", {"name": p})]) for p in PAGES),
                "Flow rises by 1.2 L/min per speed step.",
            ],
            "final_answer",
        ),
    ]


async def main() -> int:
    console = Console()
    table = Table(title="loop detectors", show_header=True)
    for column in ("case", "stop reason", "status", "model calls", "detector verdicts"):
        table.add_column(column)
    ok = True
    config = LoopConfig(policy="fail", budgets=Budgets(max_tool_rounds=40, max_model_calls=40))
    for case in cases():
        agent = Agent(ScriptedModel(case.script), [read_page, run], config=config, checklist=case.checklist)
        result = await agent.run(case.title)
        shown = [
            f"{e.detector}:{e.action}@{e.turn}"
            for e in result.events
            if isinstance(e, GuardVerdict) and e.detector not in ("guard", "repeated_call")
        ]
        ok &= result.stop_reason == case.expect
        table.add_row(case.title, result.stop_reason, result.status, str(result.totals.model_calls), " ".join(shown))
    console.print(table)
    console.print(f"every case ended as expected: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
