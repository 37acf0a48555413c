"""A step's events: the model call's `model_called` and each call's `tool_call_proposed`,
`guard_verdict` and `tool_call_finished`, made at once for a run someone watches, or kept
(`EventStamper.keep`) to be made when `result.events` is read (hotpath/kept.py). loop.py and
ending.py tell them; each event's fields are written here in field order, once."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .events import Event, GuardVerdict, Head, ModelCalled, ToolCallFinished, ToolCallProposed
from .models.base import ClientNote, ModelReply, ToolChoice, Usage
from .proposals import Proposal

if TYPE_CHECKING:
    from .hotpath.kept import Kept
    from .loop import Run


def model_event(run: Run, reply: ModelReply, r: dict[str, Any] | None = None) -> Event | None:
    """The call's `model_called`; None when the run keeps it (`EventStamper.keep`). `r`: the
    reply's `__dict__`, when the caller has read it."""
    if r is None:  # read once (each attribute of a pydantic instance goes through its `__getattr__` hook)
        r = reply.__dict__
    # the reply's values as they are now (a model may hand back one reply object again, changed)
    stamp = run.stamp
    if stamp.later and (kept := stamp.kept) is not None and len(kept) < stamp.kept_most:
        # EventStamper.keep written out (no argument tuple to unpack into another), empty notes
        # kept as None (one object less a step for the collector to walk while the run goes)
        kept.append((ModelCalled, model_called_values, _CALLED, stamp.run_id, stamp.take(), time.time(), run.turn,
                     r["model"] or run.agent.model.name, run.last_offered, run.last_choice, r["usage"], r["text"],
                     len(r["tool_calls"]), run.last_call_ms, r["notes"] or None, r["attempts"]))  # fmt: skip
        return None
    return stamp.keep(
        ModelCalled,
        model_called_values,
        run.turn,
        r["model"] or run.agent.model.name,
        run.last_offered,
        run.last_choice,
        r["usage"],
        r["text"],
        len(r["tool_calls"]),
        run.last_call_ms,
        r["notes"],
        r["attempts"],
    )


def model_called_values(
    head: Head,
    turn: int,
    model: str | None,
    offered: list[str],
    choice: ToolChoice | None,
    usage: Usage,
    text: str | None,
    n_tool_calls: int,
    duration_ms: float,
    notes: list[ClientNote] | None,
    attempts: int,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Every `model_called` field in field order, and the names given as defaults (`notes` None: none;
    `offered` copied: the run's offer is one list while it stands, `Scope.offered`)."""
    kind, run_id, seq, ts = head
    values = {
        "type": kind,
        "run_id": run_id,
        "seq": seq,
        "ts": ts,
        "turn": turn,
        "model": model,
        "tools_offered": list(offered),
        "n_tools_offered": len(offered),
        "tool_choice": choice,
        "usage": usage,
        "text": text,
        "n_tool_calls": n_tool_calls,
        "duration_ms": duration_ms,
        "notes": [] if notes is None else notes,
        "attempts": attempts,
    }
    return values, _TYPE


def proposed_event(run: Run, p: Proposal) -> Event | None:
    """The call's `tool_call_proposed`; None when the run keeps it (`EventStamper.keep`)."""
    return run.stamp.keep(ToolCallProposed, proposed_values, p, run.turn)


def proposed_values(head: Head, p: Proposal, turn: int) -> tuple[dict[str, Any], tuple[str, ...]]:
    return p.proposed_fields(turn, head), _TYPE


def verdict_event(run: Run, p: Proposal) -> Event | None:
    """The call's `guard_verdict`; None when the run keeps it (`EventStamper.keep`)."""
    return run.stamp.keep(GuardVerdict, verdict_values, p, run.turn)


def verdict_values(head: Head, p: Proposal, turn: int) -> tuple[dict[str, Any], tuple[str, ...]]:
    fields = p.verdict_fields(turn, head)
    # evidence is given only when there is some (else the default)
    return fields, _TYPE if fields["evidence"] else _TYPE_EVIDENCE


def finished_values(
    head: Head, p: Proposal, turn: int, checklist_done: list[str], content: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Every `tool_call_finished` field in field order (`Run._finish`), and the names given as defaults."""
    return p.result_fields(turn, head, checklist_done, content), _TYPE


_TYPE, _TYPE_EVIDENCE = ("type",), ("type", "evidence")


def keep_call(
    run: Run, first: int, at: int, proposed_at: float, verdict_at: float, p: Proposal, done: list[str], content: str
) -> None:
    """A run that keeps its step events (`EventStamper.later`): the common turn's call told as
    one kept item, its `tool_call_proposed` and `guard_verdict` numbered `first` and the next
    (`EventStamper.take`) and timed `proposed_at` and `verdict_at` when `kept` held `at` items,
    its `tool_call_finished` numbered and timed now: one tuple a call, not one an event (each
    an object a young collection walks for as long as the run goes), and `done` kept as None
    when empty (a list too). `call_values` makes the three's dicts when they are written or read. Were anything
    told between them (nothing in the loop does), each is kept as `EventStamper.keep` keeps it."""
    stamp = run.stamp
    kept = stamp.kept
    assert kept is not None
    seq, finished_at = stamp.take(), time.time()
    if seq == first + 2 and len(kept) == at:
        kept.append((call_values, 3, stamp.run_id, first, proposed_at, verdict_at, finished_at, p, run.turn,
                     done or None, content))  # fmt: skip
        return
    keep_pair(run, first, at, proposed_at, verdict_at, p)
    run_id, turn = stamp.run_id, run.turn
    kept.append((ToolCallFinished, finished_values, _FINISHED, run_id, seq, finished_at, p, turn, done, content))


def keep_pair(run: Run, first: int, at: int, proposed_at: float, verdict_at: float, p: Proposal) -> None:
    """The call's `tool_call_proposed` and `guard_verdict` (numbered `first` and the next) kept
    each as `EventStamper.keep` keeps it, where `kept` held `at` items: before the run waits on
    the call (a retry), when a traced run's recorder may commit and clear what it kept."""
    kept, run_id, turn = run.stamp.kept, run.stamp.run_id, run.turn
    assert kept is not None
    kept[at:at] = [
        (ToolCallProposed, proposed_values, _PROPOSED, run_id, first, proposed_at, p, turn),
        (GuardVerdict, verdict_values, _VERDICT, run_id, first + 1, verdict_at, p, turn),
    ]


def call_values(
    run_id: str,
    first: int,
    proposed_at: float,
    verdict_at: float,
    finished_at: float,
    p: Proposal,
    turn: int,
    done: list[str] | None,
    content: str,
) -> list[Kept]:
    """The three events `keep_call` kept, each as its class, dict and unset (hotpath/kept.py), as
    `EventStamper.keep` would have made them: the run's writer writes the dicts, `KeptEvents`
    builds the events from them."""
    # The values functions written out (a call and a tuple to unpack less an event: a traced run
    # makes these at each commit).
    verdict = p.verdict_fields(turn, (_VERDICT, run_id, first + 1, verdict_at))
    finished = p.result_fields(turn, (_FINISHED, run_id, first + 2, finished_at), done or [], content)
    return [
        (ToolCallProposed, p.proposed_fields(turn, (_PROPOSED, run_id, first, proposed_at)), _TYPE),
        (GuardVerdict, verdict, _TYPE if verdict["evidence"] else _TYPE_EVIDENCE),
        (ToolCallFinished, finished, _TYPE),
    ]


_CALLED, _PROPOSED, _VERDICT, _FINISHED = (
    c.model_fields["type"].default for c in (ModelCalled, ToolCallProposed, GuardVerdict, ToolCallFinished)
)
