"""The default detector set (guard/__init__.py): on by default, switched off by name, ending a
run per the stop policy, and silent on healthy work."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden import Agent, Budgets, FunctionModel, LoopConfig, ModelReply, ModelRequest, ScriptedModel, call, tool
from loopwarden.config import WRAP_UP_REQUEST
from loopwarden.events import GuardVerdict, PhaseEnded
from loopwarden.guard import DEFAULT_DETECTORS, build_detectors, default_detectors
from loopwarden.models import ToolCall

DOCS = {f"doc{i}.txt": f"document {i} says the answer involves factor {i * 7}" for i in range(40)}


@tool
def read_doc(name: str, offset: int = 0) -> str:
    """Read part of a document."""
    return DOCS[name][offset : offset + 30] or "(end of document)"


def test_all_five_are_on_by_default_and_each_can_be_switched_off() -> None:
    assert [d.name for d in build_detectors(None)] == list(DEFAULT_DETECTORS)
    assert list(DEFAULT_DETECTORS) == ["cycle", "error_loop", "no_progress", "repetition", "monologue"]
    names = [d.name for d in build_detectors(None, {"cycle", "monologue"})]
    assert names == ["error_loop", "no_progress", "repetition"]
    assert build_detectors([]) == []


def test_unknown_detector_names_are_an_error() -> None:
    with pytest.raises(ValueError, match="cylce"):
        default_detectors({"cylce"})


@pytest.mark.parametrize(
    ("policy", "status", "model_calls", "output"),
    [("degrade", "degraded", 9, "partial: a and b"), ("fail", "failed", 8, None), ("handoff", "paused", 8, None)],
)
def test_a_detector_stop_ends_the_run_per_policy(policy: str, status: str, model_calls: int, output: str) -> None:
    def cycling(request: ModelRequest) -> ToolCall | str:
        if request.messages[-1]["content"] == WRAP_UP_REQUEST:  # the degrade policy's one last call
            return "partial: a and b"
        n = sum(1 for m in request.messages if m["role"] == "assistant")
        return call("read_doc", {"name": ["doc1.txt", "doc2.txt"][n % 2]})

    model = FunctionModel(cycling)
    result = Agent(model, [read_doc], config=LoopConfig(policy=policy)).run_sync("x")  # type: ignore[arg-type]
    assert (result.status, result.stop_reason, model.calls, result.output) == (status, "cycle", model_calls, output)
    [phase] = [e for e in result.events if isinstance(e, PhaseEnded)]
    assert phase.stop_reason == "cycle" and phase.policy == policy


healthy_steps = st.lists(
    st.tuples(st.sampled_from(sorted(DOCS)), st.sampled_from([0, 30]), st.sampled_from(["", "Next I read {}."])),
    min_size=1,
    max_size=25,
    unique_by=lambda step: (step[0], step[1]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(healthy_steps)
def test_healthy_work_never_trips_a_detector(steps: list[tuple[str, int, str]]) -> None:
    """Any run of distinct reads with new content, narrated or not, then an answer: all allowed."""
    replies: list[ModelReply | str] = [
        ModelReply(text=text.format(name) or None, tool_calls=[call("read_doc", {"name": name, "offset": offset})])
        for name, offset, text in steps
    ]
    config = LoopConfig(budgets=Budgets(max_tool_rounds=30))
    result = Agent(ScriptedModel([*replies, "The answer combines the factors."]), [read_doc], config=config).run_sync(
        "x"
    )
    assert {e.action for e in result.events if isinstance(e, GuardVerdict)} == {"allowed"}
    assert result.status == "completed" and result.output == "The answer combines the factors."
