"""Approval (policy/approval.py): a call needing approval pauses the run; approve -> it runs; deny ->
the model sees the denial; without a gate the run ends paused and resumes from plain JSON."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from loopwarden import Agent, Budgets, LoopConfig, ScriptedModel, call, tool
from loopwarden.events import ApprovalDecided, ApprovalRequired, Event, RunFinished, ToolCallFinished
from loopwarden.policy.approval import ApprovalGate, Decision, PendingApproval, PendingCall
from loopwarden.tools import Tool


def payments() -> tuple[Tool, Tool, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    @tool(requires_approval=True, side_effect="write")
    def send_payment(to: str, amount: float) -> str:
        """Send money.

        Args:
            to: the payee
            amount: in EUR
        """
        sent.append({"to": to, "amount": amount})
        return f"paid {amount:.2f} EUR to {to}"

    @tool
    def balance() -> float:
        """The account balance."""
        return 1200.0

    return send_payment, balance, sent


def pay(to: str = "ACME", amount: float = 250.0) -> Any:
    return call("send_payment", {"to": to, "amount": amount})


async def test_a_call_needing_approval_waits_and_runs_once_approved() -> None:
    send_payment, balance, sent = payments()
    gate = ApprovalGate()
    model = ScriptedModel([[call("balance"), pay()], "Paid ACME 250 EUR."])
    stream = Agent(model, [send_payment, balance], approvals=gate).stream("pay ACME 250")
    seen: list[Event] = []
    async for event in stream:
        seen.append(event)
        if isinstance(event, ApprovalRequired):
            break
    request = seen[-1]
    assert isinstance(request, ApprovalRequired)
    assert request.tool == "send_payment" and request.arguments == {"to": "ACME", "amount": 250.0}
    # the run is paused on the gate: nothing moves until someone decides
    pending = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0.2)
    assert not pending.done() and sent == [] and request.call_id in gate.pending
    gate.approve(request.call_id, "within budget", by="alice")
    decided = await pending
    assert isinstance(decided, ApprovalDecided) and decided.approved and decided.by == "alice"
    rest = [e async for e in stream]
    assert sent == [{"to": "ACME", "amount": 250.0}]
    results = [e for e in rest if isinstance(e, ToolCallFinished)]
    assert [r.tool for r in results] == ["balance", "send_payment"] and all(r.ok for r in results)
    assert isinstance(rest[-1], RunFinished) and rest[-1].status == "completed"


def test_a_denied_call_is_a_result_the_model_sees() -> None:
    send_payment, balance, sent = payments()
    gate = ApprovalGate()
    model = ScriptedModel([pay(amount=9000), "The payment was refused; I did not pay."])

    async def consume() -> list[Event]:
        events = []
        async for event in Agent(model, [send_payment, balance], approvals=gate).stream("pay 9000"):
            events.append(event)
            if isinstance(event, ApprovalRequired):
                gate.deny(event.call_id, "over the 1000 EUR limit")
        return events

    events = asyncio.run(consume())
    assert sent == []
    seen = json.loads(model.requests[1].messages[-1]["content"])
    assert seen["ok"] is False and seen["error_type"] == "denied"
    assert "over the 1000 EUR limit" in seen["message"] and "do not retry" in seen["user_action"]
    [result] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert result.error_type == "denied" and not result.executed
    assert events[-1].status == "completed"  # type: ignore[attr-defined]


def test_no_decision_within_the_timeout_is_a_denial() -> None:
    send_payment, balance, sent = payments()
    model = ScriptedModel([pay(), "No approval came; nothing was paid."])
    result = Agent(model, [send_payment, balance], approvals=ApprovalGate(timeout=0.1)).run_sync("pay")
    [decided] = [e for e in result.events if isinstance(e, ApprovalDecided)]
    assert not decided.approved and decided.by == "timeout" and sent == []
    assert result.status == "completed"


def test_without_a_gate_the_run_pauses_and_resumes_from_json_after_a_restart() -> None:
    send_payment, balance, sent = payments()
    model = ScriptedModel([[call("balance"), pay()]])
    paused = Agent(model, [send_payment, balance], system="You pay bills.").run_sync("pay ACME", run_id="r-1")
    assert paused.status == "paused" and paused.stop_reason == "approval_required"
    assert sent == [] and [e.type for e in paused.events].count("tool_call_finished") == 0  # none of the turn ran
    stored = json.dumps(paused.output)  # what a server persists

    # "another process": fresh tools, a fresh agent and model, only the stored JSON carried over
    send_payment2, balance2, sent2 = payments()
    pending = PendingApproval.model_validate_json(stored)
    [waiting] = pending.calls
    model2 = ScriptedModel(["Paid ACME 250 EUR; balance was 1200 EUR."])
    agent = Agent(model2, [send_payment2, balance2], system="You pay bills.")
    events = asyncio.run(_collect(agent.resume(pending, {waiting.call_id: True})))
    assert sent2 == [{"to": "ACME", "amount": 250.0}]
    assert {e.run_id for e in events} == {"r-1"}
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.status == "completed"
    assert finished.output == "Paid ACME 250 EUR; balance was 1200 EUR."
    messages = model2.requests[0].messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert json.loads(messages[-1]["content"])["data"] == "paid 250.00 EUR to ACME"


def test_resuming_with_a_denial_tells_the_model() -> None:
    send_payment, balance, sent = payments()
    paused = Agent(ScriptedModel([pay()]), [send_payment, balance]).run_sync("pay")
    pending = PendingApproval.model_validate(paused.output)
    model = ScriptedModel(["Not paid: the request was denied."])
    decision = Decision(approve=False, reason="duplicate invoice", by="bob")
    events = asyncio.run(
        _collect(Agent(model, [send_payment, balance]).resume(pending, {pending.calls[0].call_id: decision}))
    )
    assert sent == []
    seen = json.loads(model.requests[0].messages[-1]["content"])
    assert seen["error_type"] == "denied" and "duplicate invoice" in seen["message"]
    assert events[-1].status == "completed"  # type: ignore[attr-defined]


def test_a_decision_made_ahead_of_time_is_used_without_waiting() -> None:
    send_payment, balance, sent = payments()
    first = pay()
    gate = ApprovalGate()
    model = ScriptedModel([first, "done"])
    # ids are assigned per proposal; decide on whatever id the model's first call gets
    original = model.complete

    async def complete_and_approve(request: Any) -> Any:
        reply = await original(request)
        for tool_call in reply.tool_calls:
            gate.approve(tool_call.id)
        return reply

    model.complete = complete_and_approve  # type: ignore[method-assign]
    result = Agent(model, [send_payment, balance], approvals=gate).run_sync("pay")
    assert sent == [{"to": "ACME", "amount": 250.0}] and result.status == "completed"


async def _collect(stream: Any) -> list[Event]:
    return [event async for event in stream]


async def test_calls_of_one_turn_are_announced_together_and_decided_in_any_order() -> None:
    send_payment, balance, sent = payments()
    gate = ApprovalGate()
    model = ScriptedModel([[pay("ACME", 10), pay("Globex", 20)], "Paid ACME only."])
    stream = Agent(model, [send_payment, balance], approvals=gate).stream("pay both")
    announced: list[ApprovalRequired] = []
    async for event in stream:
        if isinstance(event, ApprovalRequired):
            announced.append(event)
            if len(announced) == 2:
                break
    assert set(gate.pending) == {a.call_id for a in announced}  # both waiting before any decision
    gate.deny(announced[1].call_id, "unknown payee")
    gate.approve(announced[0].call_id)
    rest = [e async for e in stream]
    assert sent == [{"to": "ACME", "amount": 10.0}] and gate.pending == {}
    results = [e for e in rest if isinstance(e, ToolCallFinished)]
    assert [(r.ok, r.error_type) for r in results] == [(True, None), (False, "denied")]


def test_time_waiting_for_a_person_is_not_charged_to_the_time_budget() -> None:
    send_payment, balance, sent = payments()
    gate = ApprovalGate()
    model = ScriptedModel([pay(), "Paid."])
    config = LoopConfig(budgets=Budgets(max_seconds=0.5))

    async def slow_reviewer() -> list[Event]:
        events = []
        async for event in Agent(model, [send_payment, balance], approvals=gate, config=config).stream("pay"):
            events.append(event)
            if isinstance(event, ApprovalRequired):
                await asyncio.sleep(0.8)  # longer than the whole run's budget
                gate.approve(event.call_id)
        return events

    events = asyncio.run(slow_reviewer())
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.status == "completed" and finished.output == "Paid."
    assert sent == [{"to": "ACME", "amount": 250.0}]


def test_a_decision_from_another_thread_wakes_the_waiting_loop_thread_safely() -> None:
    """A web handler decides on a worker thread while the run waits on the event loop. In debug
    mode asyncio refuses a future resolved from another thread (it would not wake the loop)."""
    gate = ApprovalGate()
    call = PendingCall(call_id="c1", tool="delete_file", arguments={"path": "a.csv"}, turn=1)
    problems: list[BaseException] = []

    def decide_elsewhere() -> None:
        try:
            gate.approve("c1", by="alice")
        except BaseException as error:  # reported by the assertion below
            problems.append(error)

    async def main() -> Decision | None:
        waiting = asyncio.create_task(gate.wait(call))
        while "c1" not in gate.pending:
            await asyncio.sleep(0)
        thread = threading.Thread(target=decide_elsewhere)
        thread.start()
        thread.join()  # the decision is made (or refused) before the loop runs on
        if problems:
            waiting.cancel()
            return None
        return await waiting

    # A refused wake-up leaves the waiting task stuck for good: the run goes on a daemon thread,
    # joined with a bound, so such a failure ends the test instead of hanging the suite.
    outcome: list[Decision | None] = []
    runner = threading.Thread(target=lambda: outcome.append(asyncio.run(main(), debug=True)), daemon=True)
    runner.start()
    runner.join(60)
    assert problems == []
    assert outcome and outcome[0] is not None and outcome[0].approve and outcome[0].by == "alice"
