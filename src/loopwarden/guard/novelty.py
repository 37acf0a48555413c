"""What is new in a run: the clock the loop guards read to tell a run that is going around in
circles from one that is making progress while it revisits things.

Two counters only ever go up. `results` moves when a call that ran returns content not seen
before in the run (volatile parts such as timestamps and ids stripped), when a write is made
that was not made before, or when a checklist item is done. `text` moves when the model says a
sentence it has not said before in the run (numbers masked, so "attempt 3" and "attempt 4" are
one sentence). Answers from the cache, refused calls and polling calls are never new.

`writes` counts every successful write. The repeated-call ladder reads `writes` and `text`
(guard/repeat.py says how); the cycle detector holds off while `results` or `text` moves within
the cycle's last period; no_progress asks which calls returned something new.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from ..hotpath.fastjson import encoder

if TYPE_CHECKING:
    from ..state import CallRecord, RunState
    from ..tools import ToolResult

VOLATILE_KEY = re.compile(
    r"^(id|uuid|guid|etag|nonce|ts|timestamp|time|date|datetime|created|updated|modified|elapsed|duration|took"
    r"|latency|request_?id|trace_?id|span_?id|run_?id|call_?id|session_?id)$"
    r"|(_id|_at|_ts|_time|_ms|_seconds)$",
    re.IGNORECASE,
)
_VOLATILE_TEXT = re.compile(
    r"(?=[0-9a-fA-F])(?:"  # every alternative starts with a hex digit: other positions fail fast
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"  # ISO date(-time)
    # The rest start at a word start, checked once for all of them. Their runs of digits are
    # possessive (never given back): what follows a run can never be a digit, so giving one
    # back could not make a match, and trying costs most of the time where nothing matches.
    r"|\b(?:\d{1,2}+:\d{2}:\d{2}(?:\.\d+)?\b"  # clock time
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"  # uuid
    r"|[0-9a-fA-F]{16,}+\b"  # long hex ids, hashes
    r"|\d{10,}+\b"  # epoch seconds / milliseconds
    r"|\d++(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b))"  # durations
)
"""Volatile parts of a text: `tests/test_hot_path.py` checks it against the plain alternation
(`PLAIN_VOLATILE_TEXT` there) it was written from."""


_ASCII_SPACE = bytes(c for c in range(128) if chr(c).isspace() and c != 32)  # and " ": what `split()`, `\s` take
_CLASSES = bytes.maketrans(
    b"0123456789abcdefABCDEF" + _ASCII_SPACE + b"ms", b"0" * 10 + b"a" * 12 + b"\t" * len(_ASCII_SPACE) + b"mm"
)
_HEX = bytes.maketrans(b"0123456789abcdefABCDEF", b"a" * 22)


def _strip_text(text: str) -> str:
    """`" ".join(_VOLATILE_TEXT.sub("<v>", text).split())`. An ASCII text (most tool output) is
    read in C first, its characters as classes (a digit, a hex letter, " ", another space, m or s): every
    alternative of the pattern needs 4 digits in a row, digit-colon-digit-digit, a digit then m
    or s (a space between at most) or 8 hex characters in a row, so a text with none of them has
    nothing to blank and the sub's attempts at each hex position (about 13,000 instructions for a
    25-character text) are not made; nor is the split when the spacing is single spaces already.
    (Classes as a str: `in` on bytes costs several times as much.) tests/test_hot_path.py checks
    this against the sub on random texts."""
    if text.isascii():
        raw = text.encode()
        classes = raw.translate(_CLASSES).decode()
        if not (
            "0000" in classes
            or "0:00" in classes
            or "0m" in classes
            or "0 m" in classes
            or "0\tm" in classes
            or "aaaaaaaa" in raw.translate(_HEX).decode()
        ):
            if "\t" not in classes and "  " not in text and text[:1] != " " and text[-1:] != " ":
                return text  # nothing to blank and nothing to respace
            return " ".join(text.split())
    return " ".join(_VOLATILE_TEXT.sub("<v>", text).split())


def _strip_volatile(value: Any) -> Any:
    if isinstance(value, str):
        return _strip_text(value)
    if isinstance(value, dict):
        return {k: _strip_volatile(v) for k, v in value.items() if not VOLATILE_KEY.search(str(k))}
    if isinstance(value, list | tuple):
        return [_strip_volatile(v) for v in value]
    return value


_digest_json = encoder(sort_keys=True, ensure_ascii=False, separators=(", ", ": "), default=str)


def content_hash(result: ToolResult) -> str:
    """A hash of what a result says, without the parts that change on every call."""
    return hashlib.sha256(_content_text(result).encode("utf-8", "surrogatepass")).hexdigest()


_KEY_SCALARS = frozenset({str, int, float, bool, type(None)})


def content_key(result: ToolResult) -> str:
    """What a result says, as `content_hash` reads it (volatile parts stripped), for telling
    results apart within a run: as text while it is short, else its hash. A result whose data is
    a plain scalar is spelt as the repr of its parts (a tuple: no JSON to write, and it starts with
    `(`, as JSON never does nor a hash); two results of one shape have one key exactly when their
    content hashes are equal."""
    fields = result.__dict__
    data, message = fields["data"], fields["message"]
    if type(data) is str and message is None:  # the common result, as below with its two parts written out
        if fields["ok"] is True and fields["error_type"] is None:  # the common success: its head is known
            return _short_or_hash(f"(True, None, None, {_strip_text(data)!r})")
        return _short_or_hash(f"({fields['ok']!r}, {fields['error_type']!r}, None, {_strip_text(data)!r})")
    if type(data) in _KEY_SCALARS and (message is None or type(message) is str):
        # the tuple's repr, written out: no tuple, and no recursion guard (Py_ReprEnter) for it
        text = f"({fields['ok']!r}, {fields['error_type']!r}, {_strip_volatile(message)!r}, {_strip_volatile(data)!r})"
    else:
        text = _content_text(result)
    return _short_or_hash(text)


def _short_or_hash(text: str) -> str:
    return text if len(text) <= 64 else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _content_text(result: ToolResult) -> str:
    payload = {
        "ok": result.ok,
        "error_type": result.error_type,
        "message": _strip_volatile(result.message),
        "data": _strip_volatile(result.data),
    }
    return _digest_json(payload)


_DIGITS = re.compile(r"\d+")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")


class Novelty:
    def __init__(self) -> None:
        self.results = 0
        self.text = 0
        self.writes = 0
        """Successful writes made (every one, repeated or not): the world may have changed."""
        self._digests: set[str] = set()
        self._writes: set[str] = set()
        self._sentences: set[str] = set()
        self._calls: dict[str, tuple[bool, str | None, bool]] = {}  # "turn:call id" -> (new, digest, new content)
        self._last: tuple[CallRecord | None, tuple[bool, str | None, bool]] = (None, (False, None, False))

    @property
    def total(self) -> int:
        return self.results + self.text

    def observe_results(self, turn: int, records: list[CallRecord], state: RunState) -> None:
        """After a turn's results; call once per turn, before the detectors see them."""
        for record in records:
            self._observe(record)  # is_new's work
        checklist = state.checklist
        if checklist is not None and any(done == turn for done in checklist.done.values()):
            self.results += 1

    def is_new(self, record: CallRecord) -> bool:
        """Whether this call's result told something new, or it made a write not made before
        (worked out once per call)."""
        return self._observe(record)[0]

    def new_content(self, record: CallRecord) -> bool:
        """Whether this call's result content was not seen before (a new write alone is not)."""
        return self._observe(record)[2]

    def outcome(self, record: CallRecord) -> tuple[bool, str | None, bool]:
        """(`is_new`, `digest_of`, `new_content`) of a call, in one call."""
        return self._observe(record)

    def digest_of(self, record: CallRecord) -> str | None:
        """The content key of a call that ran (`content_key`; None for cached, refused or polling
        calls): equal for two calls exactly when their content hashes are."""
        return self._observe(record)[1]

    def _observe(self, record: CallRecord) -> tuple[bool, str | None, bool]:
        if record is self._last[0]:  # the loop, the ladder and the detectors ask of one record in turn
            return self._last[1]
        key = f"{record.turn}:{record.call_id}"
        known = self._calls.get(key)
        if known is not None:
            self._last = (record, known)
            return known
        new, digest, content = False, None, False
        result = record.result
        if result is not None and record.executed and not record.cached and not record.exempt:
            digest = content_key(result)
            if digest not in self._digests:
                self._digests.add(digest)
                new = content = True
            if record.writes and result.ok:
                self.writes += 1
                if record.fingerprint not in self._writes:
                    self._writes.add(record.fingerprint)
                    new = True
        self._calls[key] = found = (new, digest, content)
        self._last = (record, found)
        if len(self._calls) > 4096:  # only the latest calls are asked about again
            for stale in list(self._calls)[:2048]:
                del self._calls[stale]
        self.results += new
        return new, digest, content

    def observe_text(self, text: str) -> bool:
        """After a model reply; whether it said something it had not said before."""
        new = False
        for raw in _SENTENCE.split(text):
            words = raw.lower().split()
            if len(words) < 3:
                continue
            sentence = _DIGITS.sub("#", " ".join(words))
            if sentence not in self._sentences:
                self._sentences.add(sentence)
                new = True
        self.text += new
        return new


def novelty_of(state: RunState) -> Novelty:
    """The run's novelty clock (kept with the run state, made on first use)."""
    found = state.data.get("novelty")
    if not isinstance(found, Novelty):
        found = state.data["novelty"] = Novelty()
    return found
