"""Fingerprints, the ladder, the repeat guard and budgets (guard/)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopwarden.events import Totals
from loopwarden.guard import Budgets, Ladder, Price, RepeatGuard, Rung, args_hash, canonical_json, fingerprint
from loopwarden.models import Usage
from loopwarden.state import CallRecord
from loopwarden.tools import ToolResult, tool

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=6)


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@given(json_objects)
def test_key_order_never_changes_the_fingerprint(arguments: dict[str, Any]) -> None:
    assert fingerprint("t", arguments) == fingerprint("t", _reordered(arguments))
    assert args_hash(arguments) == args_hash(_reordered(arguments))


@given(json_objects)
def test_canonical_json_round_trips_to_the_same_value(arguments: dict[str, Any]) -> None:
    assert json.loads(canonical_json(arguments)) == json.loads(json.dumps(arguments))


@given(json_objects, st.integers(), st.integers())
def test_calls_differing_only_in_offset_are_different(arguments: dict[str, Any], a: int, b: int) -> None:
    first, second = {**arguments, "offset": a}, {**arguments, "offset": b}
    assert (fingerprint("read_file", first) == fingerprint("read_file", second)) == (a == b)


@given(json_objects)
def test_tool_name_is_part_of_the_identity(arguments: dict[str, Any]) -> None:
    assert fingerprint("a", arguments) != fingerprint("b", arguments)


@given(st.lists(st.sampled_from([object(), {1, 2}, b"bytes", float("nan"), float("inf"), 1 + 2j]), max_size=4))
def test_fingerprint_never_raises_on_unserialisable_arguments(values: list[Any]) -> None:
    arguments = {"v": values, "self": None}
    first = fingerprint("t", arguments)
    assert isinstance(first, str)
    assert first == fingerprint("t", arguments)  # stable for the same objects


def test_circular_arguments_fall_back_to_repr() -> None:
    loop: dict[str, Any] = {}
    loop["me"] = loop
    assert fingerprint("t", loop).startswith("t:")


def test_ladder_rungs_follow_the_configured_counts() -> None:
    ladder = Ladder()
    assert [ladder.rung(n) for n in range(1, 7)] == [
        Rung.NONE,
        Rung.NONE,
        Rung.NUDGE,
        Rung.NARROW,
        Rung.STOP,
        Rung.STOP,
    ]
    custom = Ladder(nudge_at=2, narrow_at=2, stop_at=3)
    assert [custom.rung(n) for n in (1, 2, 3)] == [Rung.NONE, Rung.NARROW, Rung.STOP]


@tool
def read(path: str) -> str:
    """Read."""
    return path


@tool(side_effect="write")
def write(path: str, text: str) -> None:
    """Write."""


@tool(repeatable=True)
def poll(job: str) -> str:
    """Poll a job."""
    return "running"


def test_repeat_guard_answers_known_results_and_climbs_the_ladder() -> None:
    guard = RepeatGuard()
    fp = fingerprint("read", {"path": "a"})
    first = guard.check(fp, read, turn=1)
    assert first.action == "allowed" and first.executes
    guard.record(fp, read, ToolResult.success("A"), turn=1)
    actions = [guard.check(fp, read, turn=t) for t in range(2, 6)]
    assert [d.action for d in actions] == ["cached", "nudged", "narrowed", "stopped"]
    assert all(d.cached == ToolResult.success("A") for d in actions)
    assert actions[0].first_turn == 1


def test_a_write_makes_known_results_stale_but_keeps_counting() -> None:
    guard = RepeatGuard()
    fp = fingerprint("read", {"path": "a"})
    guard.check(fp, read, 1)
    guard.record(fp, read, ToolResult.success("old"), 1)
    wfp = fingerprint("write", {"path": "a", "text": "new"})
    guard.check(wfp, write, 2)
    guard.record(wfp, write, ToolResult.success(None), 2)
    again = guard.check(fp, read, 3)
    assert again.action == "allowed" and again.cached is None and again.count == 2


def test_retryable_failures_are_not_served_from_memory() -> None:
    guard = RepeatGuard()
    fp = fingerprint("read", {"path": "a"})
    guard.check(fp, read, 1)
    guard.record(fp, read, ToolResult.failure("timeout", "slow", retryable=True), 1)
    assert guard.check(fp, read, 2).cached is None


def test_repeatable_tools_are_exempt() -> None:
    guard = RepeatGuard()
    fp = fingerprint("poll", {"job": "j"})
    for turn in range(1, 10):
        decision = guard.check(fp, poll, turn)
        assert decision.action == "allowed" and decision.executes
        guard.record(fp, poll, ToolResult.success("running"), turn)


def test_budgets_report_the_first_exhausted_one() -> None:
    budgets = Budgets(max_tool_rounds=3, max_model_calls=10, max_tokens=100, max_seconds=5, max_cost=0.5)
    assert budgets.exhausted(Totals(), 0) is None
    assert budgets.exhausted(Totals(tool_rounds=3), 0) == (
        "tool_round_budget",
        "budget exhausted: 3 of 3 tool rounds used",
    )
    assert budgets.exhausted(Totals(model_calls=10), 0)[0] == "model_call_budget"  # type: ignore[index]
    assert budgets.exhausted(Totals(prompt_tokens=60, completion_tokens=40), 0)[0] == "token_budget"  # type: ignore[index]
    assert budgets.exhausted(Totals(), 5.0)[0] == "time_budget"  # type: ignore[index]
    assert budgets.exhausted(Totals(cost=0.5), 0)[0] == "cost_budget"  # type: ignore[index]


def test_price_counts_cached_tokens_at_their_rate() -> None:
    price = Price(input=1.0, output=2.0, cached_input=0.1)
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=500_000, cached_tokens=400_000)
    assert abs(price.cost(usage) - (0.6 + 0.04 + 1.0)) < 1e-9


def test_each_settled_call_keeps_what_had_changed_by_its_own_turn() -> None:
    # The guard keeps one (writes, text) tuple while nothing changes; a write between two
    # turns must still hold back only the call settled before it.
    guard = RepeatGuard()
    a, b = fingerprint("read", {"path": "a"}), fingerprint("read", {"path": "b"})

    def ran(turn: int, fp: str, path: str) -> CallRecord:
        guard.check(fp, read, turn)
        guard.record(fp, read, ToolResult.success(path), turn)
        return CallRecord(turn, f"c{turn}", "read", {"path": path}, fp, ToolResult.success(path), executed=True)

    guard.settle([ran(1, a, "a")])
    guard.novelty.writes += 1  # a successful write after turn 1's call settled
    guard.settle([ran(2, b, "b")])
    held = [guard.check(a, read, t).action for t in (3, 4)]
    climbed = [guard.check(b, read, t).action for t in (3, 4)]
    assert held == ["cached", "cached"]  # the world may have changed since: asking again is fair
    assert climbed == ["cached", "nudged"]
