"""Content repetition (guard/repetition.py): chanting is flagged; code, tables and lists are not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loopwarden import Agent, ChecklistItem, LoopConfig, ScriptedModel, call, tool
from loopwarden.events import Event, GuardVerdict
from loopwarden.guard import RepetitionDetector
from loopwarden.guard.repetition import longest_token_run, prose
from loopwarden.state import RunState

CHANT = "I will now mark the task as complete."


@tool
def rename(old: str, new: str) -> str:
    """Rename a file."""
    return f"renamed {old} to {new}"


def flagged(events: list[Event]) -> list[GuardVerdict]:
    return [e for e in events if isinstance(e, GuardVerdict) and e.detector == "repetition"]


def check(text: str) -> bool:
    """Whether a fresh detector objects to this one text-only reply."""
    state = RunState()
    state.add_reply(1, text, 0, True)
    return RepetitionDetector().on_text(1, text, True, state) is not None


def test_one_sentence_fifteen_times_in_a_reply_is_rejected_and_asked_again() -> None:
    model = ScriptedModel([" ".join([CHANT] * 15), "Renamed 3 files; the task is complete."])
    result = Agent(model, [rename]).run_sync("rename the files")
    [verdict] = flagged(result.events)
    assert verdict.action == "nudged" and verdict.turn == 1
    assert verdict.evidence[0] == f"15x in one reply: {CHANT.lower()}"
    assert result.status == "completed" and result.output == "Renamed 3 files; the task is complete."
    assert "repeats the same words" in model.requests[1].messages[-1]["content"]


def test_one_sentence_across_fifteen_replies_is_stopped() -> None:
    checklist = [ChecklistItem(name="renamed", tool="rename")]
    config = LoopConfig(policy="fail", disabled_detectors=frozenset({"monologue"}))
    model = ScriptedModel([CHANT] * 15)
    result = Agent(model, [rename], checklist=checklist, config=config).run_sync("rename the files")
    actions = [(v.action, v.turn) for v in flagged(result.events)]
    assert actions == [("nudged", 3), ("narrowed", 4), ("stopped", 5)]
    assert result.stop_reason == "repetition" and result.status == "failed"
    assert model.calls == 5
    assert "in 3 replies" in flagged(result.events)[0].evidence[0]


def test_a_short_token_repeated_many_times_is_flagged() -> None:
    assert check("Here is the query: " + "SELECT " * 40)
    assert not check("SELECT the rows, then SELECT again if needed.")


def test_a_long_code_block_is_not_flagged() -> None:
    code = "\n".join(["x = 0", "x = 0", "print(x)"] * 60 + ["SELECT SELECT SELECT SELECT SELECT SELECT SELECT"] * 20)
    assert not check(f"Here is the script:\n\n```python\n{code}\n```\n\nRun it once.")


def test_a_fifty_row_table_is_not_flagged() -> None:
    rows = "\n".join(f"| sample {i} | 0.0 | 0.0 | 0.0 | ok | ok | ok |" for i in range(50))
    table = "| name | a | b | c | d | e | f |\n|---|---|---|---|---|---|---|\n" + rows
    assert not check(f"The measurements:\n\n{table}\n\nAll samples passed.")


def test_lists_and_quoted_lines_are_not_flagged() -> None:
    items = "\n".join("- The value is within the expected range." for _ in range(20))
    numbered = "\n".join(f"{i}. Check the value is within range." for i in range(1, 21))
    assert not check(f"Checks:\n{items}\n\n{numbered}")


def test_narration_with_tool_calls_is_not_counted_across_replies() -> None:
    names = [f"f{i}.txt" for i in range(8)]
    replies = [_with_text("Let me rename the next file.", call("rename", {"old": n, "new": n.upper()})) for n in names]
    result = Agent(ScriptedModel([*replies, "All 8 files renamed."]), [rename]).run_sync("rename")
    assert flagged(result.events) == []
    assert result.status == "completed"


def _with_text(text: str, tool_call: object) -> object:
    from loopwarden.models import ModelReply

    return ModelReply(text=text, tool_calls=[tool_call])  # type: ignore[list-item]


def test_the_prose_filter_keeps_running_text_only() -> None:
    text = "Intro sentence here.\n```\ncode line\n```\n| a | b |\n- item\n    indented code\nClosing words."
    kept = prose(text)
    assert "Intro sentence here." in kept and "Closing words." in kept
    assert "code line" not in kept and "| a |" not in kept and "item" not in kept and "indented" not in kept


sentence_words = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "pump", "flow", "rose", "fell"]),
    min_size=4,
    max_size=8,
    unique=True,
)


@given(st.lists(sentence_words, min_size=1, max_size=30, unique_by=tuple))
def test_distinct_sentences_are_never_flagged(sentences: list[list[str]]) -> None:
    text = " ".join(" ".join(words).capitalize() + "." for words in sentences)
    assert longest_token_run(text)[1] < 10
    assert not check(text)
