"""Monologue (guard/monologue.py): text-only replies while tools are offered and the task is open."""

from __future__ import annotations

from loopwarden import Agent, ChecklistItem, LoopConfig, ModelReply, ScriptedModel, call, tool
from loopwarden.events import Event, GuardVerdict, ModelCalled


@tool
def send_invoice(customer: str) -> str:
    """Send an invoice."""
    return f"invoice sent to {customer}"


CHECKLIST = [ChecklistItem(name="invoice sent", tool="send_invoice")]
TALK = [
    "I will send the invoice to ACME now.",
    "Sending the invoice to the customer next.",
    "Right, the invoice goes out to ACME in a moment.",
    "Preparing to send it.",
    "About to call the invoicing tool.",
]


def found(events: list[Event]) -> list[GuardVerdict]:
    return [e for e in events if isinstance(e, GuardVerdict) and e.detector == "monologue"]


def test_talking_instead_of_acting_is_steered_then_forced_then_stopped() -> None:
    model = ScriptedModel(TALK)
    result = Agent(model, [send_invoice], checklist=CHECKLIST, config=LoopConfig(policy="fail")).run_sync("bill ACME")
    assert [(v.action, v.turn) for v in found(result.events)] == [("nudged", 2), ("narrowed", 3), ("stopped", 4)]
    assert result.stop_reason == "monologue" and result.status == "failed"
    choices = [e.tool_choice for e in result.events if isinstance(e, ModelCalled)]
    assert choices == ["auto", "auto", "auto", "required"]  # narrowing demands a call
    assert "invoice sent" in found(result.events)[0].reason


def test_a_monologue_that_turns_into_action_completes() -> None:
    model = ScriptedModel([TALK[0], TALK[1], call("send_invoice", {"customer": "ACME"}), "Invoice sent to ACME."])
    result = Agent(model, [send_invoice], checklist=CHECKLIST).run_sync("bill ACME")
    assert result.status == "completed" and result.stop_reason == "checklist_complete"
    assert [v.action for v in found(result.events)] == ["nudged"]


def test_without_open_work_a_text_reply_is_not_a_monologue() -> None:
    result = Agent(ScriptedModel(["Nothing to bill today."]), [send_invoice]).run_sync("anything to bill?")
    assert found(result.events) == [] and result.output == "Nothing to bill today."


def test_empty_replies_count_as_doing_nothing() -> None:
    model = ScriptedModel([ModelReply(), ModelReply(), ModelReply(), ModelReply(), ModelReply()])
    result = Agent(model, [send_invoice], checklist=CHECKLIST, config=LoopConfig(policy="fail")).run_sync("bill")
    assert result.stop_reason == "monologue" and model.calls == 4
