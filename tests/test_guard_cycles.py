"""Cycle detection (guard/cycles.py): A-B-A-B, A-B-C, 6-cycles are stopped; an interrupted
cycle that resumes is still one; a cycle broken by a different continuation is not."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from eventcheck import verdicts
from loopwarden import Agent, Budgets, FunctionModel, Ladder, LoopConfig, ModelReply, ModelRequest, call, tool
from loopwarden.agent import RunResult
from loopwarden.events import GuardVerdict
from loopwarden.guard import CycleDetector, fingerprint
from loopwarden.guard.cycles import tail_cycle
from loopwarden.models import ToolCall

NOTES = {name: f"contents of {name}" for name in "abcdefgh"}


@tool
def read_note(name: str) -> str:
    """Read one note.

    Args:
        name: a single letter a..h
    """
    return NOTES[name]


def follows(script: Sequence[str], *, then: str | None = None) -> FunctionModel:
    """A model that reads notes in the order of `script` (looping over it forever when `then`
    is None, else answering `then` after one pass), whatever it is offered or told."""

    def reply(request: ModelRequest) -> ToolCall | str:
        n = len([m for m in request.messages if m["role"] == "assistant" and m.get("tool_calls")])
        if then is not None and n >= len(script):
            return then
        return call("read_note", {"name": script[n % len(script)]})

    return FunctionModel(reply)


def cycle_verdicts(events: list[object]) -> list[GuardVerdict]:
    return [e for e in events if isinstance(e, GuardVerdict) and e.detector == "cycle"]


ROOMY = Budgets(max_tool_rounds=100, max_model_calls=100)


def run(model: FunctionModel, **config: object) -> tuple[RunResult, list[GuardVerdict]]:
    settings = LoopConfig(policy="fail", budgets=ROOMY, **config)  # type: ignore[arg-type]
    result = Agent(model, [read_note], config=settings).run_sync("read the notes")
    return result, cycle_verdicts(result.events)


def test_a_b_a_b_is_stopped_as_a_cycle() -> None:
    model = follows("ab")
    result, found = run(model)
    assert result.stop_reason == "cycle" and result.status == "failed"
    assert [(v.action, v.turn) for v in found] == [("nudged", 4), ("narrowed", 6), ("stopped", 8)]
    assert found[-1].evidence == [fingerprint("read_note", {"name": n}) for n in "ab"]
    assert model.calls == 8


def test_a_b_c_is_stopped_as_a_cycle() -> None:
    model = follows("abc")
    result, found = run(model)
    assert result.stop_reason == "cycle"
    assert [(v.action, v.turn) for v in found] == [("nudged", 6), ("narrowed", 9), ("stopped", 12)]
    assert "a cycle of 3 calls repeated 4 times" in found[-1].reason


def test_a_six_call_cycle_is_stopped_within_the_default_tool_round_budget() -> None:
    model = follows("abcdef")
    result = Agent(model, [read_note], config=LoopConfig(policy="fail")).run_sync("read the notes")  # default budgets
    found = cycle_verdicts(result.events)
    assert result.stop_reason == "cycle"
    # found after two full periods; then every 3 calls that go on with it climb a rung
    assert [(v.action, v.turn) for v in found] == [("nudged", 12), ("narrowed", 15), ("stopped", 18)]
    assert len(found[-1].evidence) == 6


def test_an_eight_call_cycle_is_caught_too() -> None:
    result, found = run(follows("abcdefgh"))
    assert result.stop_reason == "cycle"
    assert [v.turn for v in found] == [16, 19, 22]


def test_interrupted_once_then_answered_is_not_stopped() -> None:
    model = follows("ababcabab", then="all notes read")
    outcome = Agent(model, [read_note]).run_sync("read")
    assert outcome.status == "completed" and outcome.stop_reason == "final_answer"
    assert outcome.output == "all notes read"
    assert "stopped" not in verdicts(outcome.events)
    # C brought something new, so the A-B-A-B after it starts over: steered again, never narrowed
    assert [(v.action, v.turn) for v in cycle_verdicts(outcome.events)] == [("nudged", 4), ("nudged", 9)]


def test_a_revisit_with_something_new_said_each_time_draws_no_intervention() -> None:
    """A, B, A, B, C, A, B, A, B then an answer, the model's notes moving on with every read."""
    script = "ababcabab"

    def reply(request: ModelRequest) -> ModelReply | str:
        n = len([m for m in request.messages if m["role"] == "assistant" and m.get("tool_calls")])
        if n >= len(script):
            return "Both notes agree after the detour."
        note = f"Note {n}: comparing {script[n]} with what {'abcdefgh'[(n * 5) % 8]} said."
        return ModelReply(text=note, tool_calls=[call("read_note", {"name": script[n]})])

    outcome = Agent(FunctionModel(reply), [read_note]).run_sync("read")
    assert outcome.status == "completed" and outcome.output == "Both notes agree after the detour."
    steps = {(v.detector, v.action) for v in outcome.events if isinstance(v, GuardVerdict) and v.action != "allowed"}
    assert steps == {("repeated_call", "cached")}
    assert outcome.totals.tool_executions == 3  # identical reads are still answered from the cache


def test_interrupted_cycle_that_goes_on_is_stopped() -> None:
    result, found = run(follows("ababcababababab", then="never"))
    assert result.status == "failed"
    # the 5th identical A (call 10) reaches the repeated-call ladder's stop
    assert result.stop_reason == "repeated_call"
    # C was new, so the cycle after it starts over at the first rung instead of resuming higher
    assert [(v.action, v.turn) for v in found] == [("nudged", 4), ("nudged", 9)]
    assert "resumed" not in found[1].reason
    # on its own (a laxer repeated-call ladder), the cycle detector stops it
    result, found = run(follows("ababcababababab", then="never"), ladder=Ladder(nudge_at=3, narrow_at=4, stop_at=9))
    assert result.stop_reason == "cycle"
    assert [(v.action, v.turn) for v in found] == [("nudged", 4), ("nudged", 9), ("narrowed", 11), ("stopped", 13)]


def test_an_interrupted_cycle_resumes_one_rung_higher_when_the_interruption_was_not_new() -> None:
    @tool
    def read_note(name: str) -> str:
        """Read one note (x and y are copies of one another)."""
        return "the same notes" if name in "xy" else NOTES[name]

    model = follows("xababyabababab", then="never")
    settings = LoopConfig(policy="fail", budgets=ROOMY, ladder=Ladder(nudge_at=3, narrow_at=4, stop_at=9))
    result = Agent(model, [read_note], config=settings).run_sync("read the notes")
    found = cycle_verdicts(result.events)
    assert result.stop_reason == "cycle"
    # y told nothing x had not: the A-B cycle after it is the same one, one rung higher
    assert [(v.action, v.turn) for v in found] == [("nudged", 5), ("narrowed", 10), ("stopped", 12)]
    assert "resumed" in found[1].reason


def test_a_different_continuation_is_not_a_cycle() -> None:
    model = follows("ababcdefgh", then="done")
    outcome = Agent(model, [read_note]).run_sync("read")
    assert outcome.status == "completed" and outcome.output == "done"
    assert [v.action for v in cycle_verdicts(outcome.events)] == ["nudged"]


def test_the_same_call_repeated_is_left_to_the_repeated_call_ladder() -> None:
    outcome = Agent(follows("a"), [read_note], config=LoopConfig(policy="fail")).run_sync("x")
    assert outcome.stop_reason == "repeated_call"
    assert cycle_verdicts(outcome.events) == []


def test_the_cycle_detector_can_be_switched_off() -> None:
    config = LoopConfig(policy="fail", budgets=ROOMY, disabled_detectors=frozenset({"cycle"}))
    outcome = Agent(follows("ab"), [read_note], config=config).run_sync("x")
    assert cycle_verdicts(outcome.events) == []
    assert outcome.stop_reason == "repeated_call"  # the ladder still ends it, later


def test_max_period_is_configurable() -> None:
    config = LoopConfig(policy="fail", budgets=ROOMY)
    short = Agent(follows("abcdef"), [read_note], config=config, detectors=[lambda: CycleDetector(max_period=5)])
    outcome = short.run_sync("x")
    assert cycle_verdicts(outcome.events) == []  # a 6-cycle is beyond a max period of 5
    assert outcome.stop_reason == "repeated_call"


# -- the tail search itself -------------------------------------------------------------------------

distinct_patterns = st.lists(st.integers(0, 50), min_size=2, max_size=8, unique=True).map(
    lambda xs: [str(x) for x in xs]
)


@given(distinct_patterns, st.integers(2, 5), st.lists(st.sampled_from(["x", "y"]), max_size=4))
def test_any_repeated_pattern_is_found_with_its_period(pattern: list[str], times: int, prefix: list[str]) -> None:
    cycle = tail_cycle(prefix + pattern * times, max_period=8)
    assert cycle is not None and cycle.period == len(pattern) and cycle.repeats >= times


@given(st.lists(st.integers(), unique=True, max_size=40))
def test_distinct_calls_are_never_a_cycle(calls: list[int]) -> None:
    cycle = tail_cycle([str(c) for c in calls], max_period=8)
    assert cycle is None or cycle.repeats < 2


@given(st.integers(1, 30))
def test_period_one_is_never_reported(n: int) -> None:
    cycle = tail_cycle(["same"] * n, max_period=8)
    assert cycle is None or cycle.repeats < 2


def test_rotations_are_one_cycle() -> None:
    first, second = tail_cycle(list("abab"), 8), tail_cycle(list("baba"), 8)
    assert first is not None and second is not None and first.key == second.key
