"""Run state and the checklist (state.py): items are marked from tool results by a declared
mapping; when every required item is done the runtime itself ends the tool phase."""

from __future__ import annotations

from typing import Any

from loopwarden import Agent, ChecklistItem, ScriptedModel, ToolResult, call, tool
from loopwarden.config import CHECKLIST_DONE_REQUEST
from loopwarden.events import ModelCalled, PhaseEnded, RunFinished, ToolCallFinished
from loopwarden.state import CallRecord, Checklist

RESULTS = {"unit": "12 passed", "lint": "clean"}


@tool
def run_check(name: str) -> dict[str, Any]:
    """Run one project check.

    Args:
        name: unit, lint or e2e
    """
    if name not in RESULTS:
        return {"ok": False, "error": f"no check named {name}"}
    return {"check": name, "output": RESULTS[name]}


def checklist() -> list[ChecklistItem]:
    return [
        ChecklistItem(name="unit tests", tool="run_check", when=lambda args, r: args["name"] == "unit"),
        ChecklistItem(name="lint", tool="run_check", when=lambda args, r: args["name"] == "lint"),
        ChecklistItem(name="changelog", tool="run_check", when=lambda a, r: a["name"] == "log", required=False),
    ]


def test_the_checklist_ends_the_run_without_asking_the_model() -> None:
    model = ScriptedModel(
        [
            call("run_check", {"name": "unit"}),
            call("run_check", {"name": "lint"}),
            "Unit tests pass (12) and lint is clean.",
            call("run_check", {"name": "e2e"}),  # never reached: the runtime does not ask whether to go on
        ]
    )
    result = Agent(model, [run_check], checklist=checklist()).run_sync("check the project")
    assert result.status == "completed" and result.stop_reason == "checklist_complete"
    assert result.output == "Unit tests pass (12) and lint is clean."
    assert model.calls == 3
    final = model.requests[2]
    assert final.tools == [] and final.messages[-1] == {"role": "user", "content": CHECKLIST_DONE_REQUEST}
    offered = [e.n_tools_offered for e in result.events if isinstance(e, ModelCalled)]
    assert offered == [1, 1, 0]
    done = [e.checklist_done for e in result.events if isinstance(e, ToolCallFinished)]
    assert done == [["unit tests"], ["lint"]]
    [phase] = [e for e in result.events if isinstance(e, PhaseEnded)]
    assert phase.stop_reason == "checklist_complete"
    finished = result.events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.checklist == {"unit tests": True, "lint": True, "changelog": False}


def test_the_model_saying_it_is_done_does_not_mark_anything() -> None:
    model = ScriptedModel(
        [
            call("run_check", {"name": "unit"}),
            "All checks are done and everything passes.",  # lint never ran: not accepted
            call("run_check", {"name": "lint"}),
            "Unit tests pass and lint is clean.",
        ]
    )
    result = Agent(model, [run_check], checklist=checklist()).run_sync("check the project")
    assert result.stop_reason == "checklist_complete" and result.output == "Unit tests pass and lint is clean."
    reminder = model.requests[2].messages[-1]
    assert reminder["role"] == "user" and "Still to do: lint" in reminder["content"]
    assert model.requests[2].tools != []  # the model is sent back to work, with its tools


def test_a_failed_result_does_not_complete_an_item() -> None:
    items = Checklist(checklist())
    failed = CallRecord(1, "c1", "run_check", {"name": "unit"}, "fp", result=ToolResult.failure("exit_1", "3 failed"))
    passed = CallRecord(2, "c2", "run_check", {"name": "unit"}, "fp", result=ToolResult.success("12 passed"))
    other = CallRecord(2, "c3", "read_file", {"name": "unit"}, "fp2", result=ToolResult.success("x"))
    assert items.update(failed) == [] and items.update(other) == []
    assert items.update(passed) == ["unit tests"] and items.done == {"unit tests": 2}
    assert items.missing == ["lint"] and not items.complete
    assert items.snapshot() == {"unit tests": True, "lint": False, "changelog": False}


def test_optional_items_do_not_hold_the_run_open() -> None:
    items = Checklist(checklist())
    for turn, name in enumerate(("unit", "lint"), 1):
        items.update(CallRecord(turn, f"c{turn}", "run_check", {"name": name}, name, result=ToolResult.success("ok")))
    assert items.complete and "changelog" not in items.done


def test_without_a_checklist_a_text_reply_is_the_answer() -> None:
    model = ScriptedModel(["Nothing to check."])
    result = Agent(model, [run_check]).run_sync("x")
    assert result.status == "completed" and result.output == "Nothing to check." and model.calls == 1
