"""Fitting a request into the context window (models/budget.py), as properties: whatever the
history, what is sent keeps the system prompt, the task and the latest turn, never leaves a tool
result without the call it answers, and fits whenever those alone fit."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models.budget import (
    ASCII_CHARS_PER_TOKEN,
    CLIP_MARK,
    MARGIN_TOKENS,
    MIN_CLIPPED_CHARS,
    clip_messages,
    estimate_text_tokens,
    estimate_tokens,
    fit_request,
)

SYSTEM = {"role": "system", "content": "You explore files."}
TASK = {"role": "user", "content": "Read notes.txt and report the peak field."}


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [SYSTEM, TASK]
    for i in range(draw(st.integers(0, 60))):
        if draw(st.booleans()):
            calls = [
                {"id": f"c{i}.{j}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                for j in range(draw(st.integers(1, 3)))
            ]
            history.append({"role": "assistant", "content": "", "tool_calls": calls})
            size = draw(st.integers(10, 2000))
            history += [{"role": "tool", "tool_call_id": c["id"], "content": "r" * size} for c in calls]
        else:
            role = draw(st.sampled_from(["user", "assistant"]))
            history.append({"role": role, "content": "t" * draw(st.integers(1, 900))})
    return history


@given(histories(), st.integers(600, 8192), st.integers(16, 512))
def test_a_fitted_history_keeps_the_task_and_the_latest_turn_and_every_call_of_a_result(
    history: list[dict[str, Any]], window: int, max_tokens: int
) -> None:
    fitted = fit_request(history, None, window=window, max_tokens=max_tokens)
    sent = fitted.messages
    assert sent[:2] == [SYSTEM, TASK]
    latest = max((i for i in range(2, len(history)) if history[i]["role"] != "tool"), default=len(history))
    tail = history[latest:]  # the latest turn: a call with its results, or a message
    assert [m["role"] for m in sent[len(sent) - len(tail) :]] == [m["role"] for m in tail]  # clipped perhaps, kept
    called = {c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    assert all(m["tool_call_id"] in called for m in sent if m["role"] == "tool")
    assert len(sent) == len(history) - fitted.dropped
    if fitted.dropped == 0 and fitted.clipped_chars == 0:
        assert sent == history  # a request that fits goes out unchanged
    whole_turn = fit_request([SYSTEM, TASK, *tail], None, window=window, max_tokens=max_tokens)
    if whole_turn.fits and whole_turn.clipped_chars == 0:  # the task and the latest turn alone fit
        assert fitted.fits
        assert estimate_tokens(sent) + (fitted.max_tokens or 0) <= window


def clipped_the_plain_way(messages: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int]:
    """clip_messages as first written (the rule, read plainly): estimate everything, clip the longest
    clippable content (tool results first, then the earliest), again until it fits."""
    out = [dict(m) for m in messages]
    clipped = 0

    def longest(allow_last: bool) -> int | None:
        best, best_key = None, (0, 0)
        for i, m in enumerate(out):
            content = m.get("content")
            if m.get("role") == "system" or not isinstance(content, str) or len(content) <= MIN_CLIPPED_CHARS * 2:
                continue
            if (i == len(out) - 1 and not allow_last) or (
                "characters clipped to fit" in content and len(content) < MIN_CLIPPED_CHARS * 3
            ):
                continue
            if (key := (1 if m.get("role") == "tool" else 0, len(content))) > best_key:
                best, best_key = i, key
        return best

    for allow_last in (False, True):
        while estimate_tokens(out) > budget and (index := longest(allow_last)) is not None:
            text = out[index]["content"]
            cut = max(int((estimate_tokens(out) - budget) * ASCII_CHARS_PER_TOKEN * 1.1), len(text) // 4, 1)
            keep = max(MIN_CLIPPED_CHARS, len(text) - cut - len(CLIP_MARK) - 8)
            if keep >= len(text):
                break
            out[index]["content"] = (
                text[: keep * 2 // 3] + CLIP_MARK.format(n=len(text) - keep) + text[len(text) - keep // 3 :]
            )
            clipped += len(text) - keep
    return out, clipped


@given(histories(), st.integers(-10, 20_000))
def test_clipping_keeps_running_totals_and_clips_what_the_plain_rule_clips(
    history: list[dict[str, Any]], budget: int
) -> None:
    """clip_messages keeps each message's estimate and a heap of the clippable ones instead of
    estimating and searching the whole history after each clip: the same messages, clipped alike."""
    assert clip_messages(history, budget) == clipped_the_plain_way(history, budget)


def test_an_asked_output_cap_below_the_minimum_is_never_raised() -> None:
    # Found by hypothesis (the test above, unseeded): max_tokens=16 was raised to 256, the minimum
    # kept for a shrunk cap, so a history whose latest turn fits with 16 was trimmed and still did not fit.
    read = {"name": "read_file", "arguments": "{}"}
    calls = [{"id": f"c16.{j}", "type": "function", "function": read} for j in range(3)]
    turn = [{"role": "assistant", "content": "", "tool_calls": calls}]
    turn += [{"role": "tool", "tool_call_id": c["id"], "content": "r" * 258} for c in calls]
    history = [SYSTEM, TASK, *[{"role": "user", "content": "t"}] * 16, *turn]
    assert estimate_tokens(history) + 16 > 600 - MARGIN_TOKENS  # the whole history does not fit
    fitted = fit_request(history, None, window=600, max_tokens=16)
    assert fitted.max_tokens == 16
    assert fitted.fits and fitted.messages[-len(turn) :] == turn
    assert estimate_tokens(fitted.messages) + 16 <= 600


@given(st.text(st.characters(exclude_categories=())))  # lone surrogates too: a tool result may hold them
def test_the_token_estimate_counts_ascii_characters_as_a_third_and_others_as_one(text: str) -> None:
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    assert estimate_text_tokens(text) == int(ascii_chars / 3 + (len(text) - ascii_chars)) + 1
