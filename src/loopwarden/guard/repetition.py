"""Content repetition: model text that chants.

Four signs: one sentence many times in one reply; a short token group repeated back to back
("SELECT SELECT SELECT ..."); the same characters repeated back to back with no space between
("SELECTSELECTSELECT...", "123451234512345..."); the same sentence coming back reply after reply
with no tool call in between. Code fences, indented code, tables and list items are removed
first: a long code block or a 50-row table repeats its shape by nature and is not chanting.

The character-level sign looks at the tail of the text (a chant runs to the end of what the
model was allowed to write), for a unit of 1 to 32 non-space characters repeated at least 10
times over at least 40 characters. A unit needs two different letters or digits, so runs of
one digit (`1000000000000`), of punctuation (`----`, `....`) or a column of one value are not
chants; a run of one letter must be 40 long. `chant(text)` is the check on its own, for an
answer given with no tools; `StreamWatch` applies it to the tail of a streamed reply as it
arrives and cuts the stream when it chants.

Every reply showing a sign is a strike; strikes climb the ladder (steer, narrow, stop).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from .detector import Detector
from .ladder import Finding, Ladder, Rung, shared_ladder

if TYPE_CHECKING:
    from ..state import RunState

REPETITION_NUDGE = (
    "Your reply repeats the same words over and over. Do not repeat yourself: say each thing once. "
    "If the work is done, give the final answer once; if not, take the next step with a tool."
)

_FENCE = re.compile(r"(```|~~~).*?(\1|\Z)", re.DOTALL)
_STRUCTURED_LINE = re.compile(
    r"^(?:\s*\|.*|\s*[-+*•]\s.*|\s*\d+[.)]\s.*|\s*>.*|(?: {4}|\t).*|\s*[-=|: ]{3,}\s*)$",
    re.MULTILINE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_TOKEN = re.compile(r"\w+", re.UNICODE)  # words only: "......" or "----" is punctuation, not chanting
_GLUED = re.compile(r"(\S{1,32}?)\1{9,}")
_LETTER_RUN = re.compile(r"([^\W\d_])\1{39,}")
_NO_SENTENCES: Counter[str] = Counter()  # read only (a Counter's missing key reads 0, not stored)
TAIL = 4000
"""Characters at the end of a reply the character-level sign looks at."""


def glued_repeat(text: str, tail: int = TAIL) -> str | None:
    """A unit of characters repeated back to back with no space ("SELECTSELECT..."), or None."""
    if len(text) < 40:  # both signs need 40 characters
        return None
    end = text[-tail:]
    for match in _GLUED.finditer(end):
        unit, span = match.group(1), len(match.group(0))
        if span >= 40 and len({c for c in unit if c.isalnum()}) >= 2:
            return f"{span // len(unit)}x back to back: {unit}"
    run = _LETTER_RUN.search(end)
    return f"{len(run.group(0))}x back to back: {run.group(1)}" if run else None


def chant(text: str, sentence_repeats: int = 4, token_repeats: int = 10) -> str | None:
    """The first sign of chanting within one text (no memory of earlier replies), or None."""
    body = prose(text)
    counts = Counter(sentences(body))
    if counts:
        sentence, n = counts.most_common(1)[0]
        if n >= sentence_repeats:
            return f"{n}x in one reply: {sentence[:200]}"
    group, run = longest_token_run(body)
    if run >= token_repeats:
        return f"{run}x back to back: {group[:80]}"
    return glued_repeat(body)


def prose(text: str) -> str:
    """The running text of a reply: no code, tables, list items or quotes."""
    text = _FENCE.sub("\n", text)
    return _STRUCTURED_LINE.sub("", text)


def sentences(text: str, min_words: int = 3) -> list[str]:
    """Normalised sentences of at least `min_words` words."""
    found: list[str] = []
    if len(text.split()) < min_words:  # sentences share out the text's words: none can have enough
        return found
    for raw in _SENTENCE_END.split(text):
        sentence = " ".join(raw.lower().split())
        if len(sentence.split()) >= min_words:
            found.append(sentence)
    return found


def longest_token_run(text: str, max_group: int = 4) -> tuple[str, int]:
    """The token group (1..max_group tokens) repeated back to back the most, and how often."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    best, best_count = "", 0
    for size in range(1, max_group + 1):
        i = 0
        while i + size <= len(tokens):
            group = tokens[i : i + size]
            count, j = 1, i + size
            while tokens[j : j + size] == group:
                count, j = count + 1, j + size
            if count > best_count:
                best, best_count = " ".join(group), count
            i = j if count > 1 else i + 1
    return best, best_count


class RepetitionDetector(Detector):
    name = "repetition"
    stop_reason = "repetition"

    def __init__(
        self,
        *,
        sentence_repeats: int = 4,
        token_repeats: int = 10,
        across_replies: int = 3,
        ladder: Ladder | None = None,
    ) -> None:
        self.sentence_repeats = sentence_repeats
        self.token_repeats = token_repeats
        self.across_replies = across_replies
        self.ladder = ladder or shared_ladder(1, 2, 3)
        self._strikes = 0
        self._spoken: dict[str, int] = {}  # sentence -> text-only replies it appeared in (a Counter's __init__ costs)
        self._last_text_turn = 0
        self._tool_call_since_last_text = False

    def on_text(self, turn: int, text: str, tools_offered: bool, state: RunState) -> Finding | None:
        body = prose(text)
        self._tool_call_since_last_text = self._called_since(self._last_text_turn, state)
        self._last_text_turn = turn
        evidence = self._signs(body, text_only=self._text_only(turn, state))
        if not evidence:
            return None
        self._strikes += 1
        rung = self.ladder.rung(self._strikes)
        if rung == Rung.NONE:
            return None
        return Finding(
            detector=self.name,
            rung=rung,
            reason=f"repeated text ({evidence[0]})",
            stop_reason=self.stop_reason,
            evidence=evidence,
            count=self._strikes,
            nudge=REPETITION_NUDGE,
        )

    def _signs(self, body: str, *, text_only: bool) -> list[str]:
        evidence = []
        found = sentences(body)
        counts = Counter(found) if found else _NO_SENTENCES
        if counts and max(counts.values()) >= self.sentence_repeats:  # most_common sorts: only when one counts
            for sentence, n in counts.most_common(3):
                if n >= self.sentence_repeats:
                    evidence.append(f"{n}x in one reply: {sentence[:200]}")
        # A run of a token group is at most as long as the text has tokens (a short reply: no search).
        enough = len(_TOKEN.findall(body)) >= self.token_repeats
        group, run = longest_token_run(body) if enough else ("", 0)
        if run >= self.token_repeats:
            evidence.append(f"{run}x back to back: {group[:80]}")
        elif (glued := glued_repeat(body)) is not None:
            evidence.append(glued)
        if text_only:
            if self._tool_call_since_last_text:
                self._spoken.clear()
            for sentence in counts:
                spoken = self._spoken[sentence] = self._spoken.get(sentence, 0) + 1
                if spoken >= self.across_replies and counts[sentence] < self.sentence_repeats:
                    evidence.append(f"in {spoken} replies: {sentence[:200]}")
        return evidence

    @staticmethod
    def _called_since(turn: int, state: RunState) -> bool:
        return any(reply.n_calls for reply in state.replies if reply.turn > turn)

    @staticmethod
    def _text_only(turn: int, state: RunState) -> bool:
        """Whether this reply carried no tool call (replies with calls narrate work and may repeat)."""
        last = state.replies[-1] if state.replies else None
        return last is not None and last.turn == turn and last.n_calls == 0


class ChantInStream(Exception):
    """Raised from inside a model's stream when its tail chants: the reply is cut there."""

    def __init__(self, text: str, evidence: str) -> None:
        super().__init__(evidence)
        self.text, self.evidence = text, evidence


class StreamWatch:
    """Passes each piece of streamed text on, and stops the stream (`ChantInStream`) as soon as
    the tail of what arrived chants, instead of paying for the rest of a degenerate reply."""

    def __init__(self, forward: Callable[[str], None], every: int = 256) -> None:
        self.forward, self.every = forward, every
        self.text = ""
        self._unchecked = 0

    def __call__(self, delta: str) -> None:
        self.forward(delta)
        self.text = (self.text + delta)[-2 * TAIL :]
        self._unchecked += len(delta)
        if self._unchecked >= self.every:
            self._unchecked = 0
            found = chant(self.text)
            if found is not None:
                raise ChantInStream(self.text, found)
