"""Fitting a request into the model's context window before it is sent.

A request longer than the window is refused (HTTP 400 `context_length`), and sending it again
unchanged is refused again. The client budgets every request: the output cap first (a stage's
`max_tokens`, lowered to what the window leaves), then the prompt, by clipping the longest
message contents (tool results before user text; never the system prompt, and the last message
only as a last resort) with a marker that says how much was cut; when that is not enough (a long
history of short turns, which clipping cannot shorten), by dropping the oldest turns whole. Stages
that build big prompts (drafting, review) budget their own material by priority first
(`report.write.draft`); this is the backstop for every request, the tool loop's growing history
included.

Tokens are estimated, not counted (no tokenizer is loaded): ASCII text at 3 characters a token,
other characters at one each — deliberately high, so a fitted request fits.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .base import Message

ASCII_CHARS_PER_TOKEN = 3.0
PER_MESSAGE_TOKENS = 6
MARGIN_TOKENS = 64
"""Room for the chat template's own tokens."""
MIN_OUTPUT_TOKENS = 256
MIN_CLIPPED_CHARS = 160
CLIP_MARK = "\n[... {n} characters clipped to fit the model's context window ...]\n"


def estimate_text_tokens(text: str) -> int:
    # Counted in C: the request is estimated before every model call, a long history included
    # (a Python loop over the characters took milliseconds a call on a 100 KB history).
    ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
    return int((ascii_chars / ASCII_CHARS_PER_TOKEN) + (len(text) - ascii_chars)) + 1


def estimate_tokens(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
    total = sum(_message_tokens(m) for m in messages)
    if tools:
        total += estimate_text_tokens(json.dumps(tools, ensure_ascii=False))
    return total


def _message_tokens(message: Message) -> int:
    return PER_MESSAGE_TOKENS + estimate_text_tokens(_message_text(message))


def _message_text(message: Message) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"], ensure_ascii=False)
    return text


@dataclass(frozen=True)
class Fitted:
    messages: list[Message]
    max_tokens: int | None
    clipped_chars: int = 0
    prompt_tokens: int = 0
    """The estimate after fitting."""
    fits: bool = True
    dropped: int = 0
    """Messages of the oldest turns left out."""

    def describe(self) -> str:
        dropped = f" and dropped the {self.dropped} oldest messages" if self.dropped else ""
        return f"clipped {self.clipped_chars} characters{dropped} of the conversation to fit the context window"


def fit_request(
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    *,
    window: int | None,
    max_tokens: int | None,
    shrink: float = 1.0,
) -> Fitted:
    """Messages and output cap that fit `window` (scaled by `shrink` after a refusal)."""
    if window is None:
        return Fitted(messages, max_tokens)
    room = int(window * shrink) - MARGIN_TOKENS
    prompt = estimate_tokens(messages, tools)
    output = max_tokens if max_tokens is not None else max(MIN_OUTPUT_TOKENS, room // 4)
    if prompt + output <= room:
        return Fitted(messages, max_tokens if max_tokens is not None else None, prompt_tokens=prompt)
    # Shrunk to make room, but never below MIN_OUTPUT_TOKENS, nor above what the caller asked for.
    output = max(min(MIN_OUTPUT_TOKENS, output), min(output, room - prompt))
    if prompt + output <= room:
        return Fitted(messages, output, prompt_tokens=prompt)
    budget = room - output - (prompt - estimate_tokens(messages))
    fitted, clipped = clip_messages(messages, budget)
    dropped = 0
    if estimate_tokens(fitted) > budget:
        fitted, dropped = drop_turns(fitted, budget)
    after = estimate_tokens(fitted, tools)
    return Fitted(fitted, output, clipped, after, fits=after + output <= room, dropped=dropped)


def drop_turns(messages: list[Message], budget: int) -> tuple[list[Message], int]:
    """Leave out the oldest turns whole until the messages fit `budget` tokens: an assistant
    message goes with the tool results that answer it, so no result is left without its call.
    The system prompts, the task (the first other message) and the latest turn always stay; a
    request that does not fit even so is sent, and the server's refusal ends the call."""
    head = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages)) + 1
    starts = [i for i in range(head, len(messages)) if messages[i].get("role") != "tool" or i == head]
    total = estimate_tokens(messages)
    cut = head
    for start, end in pairwise(starts):  # the last turn is never dropped
        if total <= budget:
            break
        total -= estimate_tokens(messages[start:end])
        cut = end
    return messages[:head] + messages[cut:], cut - head


def clip_messages(messages: list[Message], budget: int) -> tuple[list[Message], int]:
    """Clip the longest contents until the messages fit `budget` tokens: tool results first,
    then user and assistant text; the system prompt never, the last message last."""
    out = [dict(m) for m in messages]
    # Each message's estimate, kept up to date as it is clipped (their sum is estimate_tokens(out)),
    # and the clippable contents in a heap, longest first: a long history is clipped in
    # n log n, not estimated and searched whole again after each clip.
    sizes = [_message_tokens(m) for m in out]
    total = sum(sizes)
    clipped = 0
    last = len(out) - 1
    for allow_last in (False, True):
        heap = [key for i, m in enumerate(out) if (key := _clippable(m, i)) and (allow_last or i != last)]
        heapq.heapify(heap)
        while total > budget and heap:
            _, negative_length, index = heapq.heappop(heap)
            text = out[index]["content"]
            if len(text) != -negative_length:
                continue  # clipped since: its current length is in the heap too
            over = total - budget
            # Cut what is over (in characters, generously), but at least a quarter of the text.
            cut = max(int(over * ASCII_CHARS_PER_TOKEN * 1.1), len(text) // 4, 1)
            keep = max(MIN_CLIPPED_CHARS, len(text) - cut - len(CLIP_MARK) - 8)
            if keep >= len(text):
                break
            head, tail = text[: keep * 2 // 3], text[len(text) - keep // 3 :]
            out[index]["content"] = head + CLIP_MARK.format(n=len(text) - keep) + tail
            clipped += len(text) - keep
            total -= sizes[index]
            sizes[index] = _message_tokens(out[index])
            total += sizes[index]
            if key := _clippable(out[index], index):
                heapq.heappush(heap, key)
    return out, clipped


def _clippable(message: Message, index: int) -> tuple[int, int, int] | None:
    """The heap key of a message whose content may be clipped (tool results first, then the
    longest, then the earliest), or None."""
    content = message.get("content")
    if message.get("role") == "system" or not isinstance(content, str) or len(content) <= MIN_CLIPPED_CHARS * 2:
        return None
    if "characters clipped to fit" in content and len(content) < MIN_CLIPPED_CHARS * 3:
        return None
    return (-1 if message.get("role") == "tool" else 0, -len(content), index)
