"""Slots: values decided by code, not guessed by the model.

A slot is read from the request (`SlotSpec.extract`), or normalised from what the model
proposed (`Normaliser`): enum synonyms map to the canonical value (`2w`, `two_weeks`,
`14 days` -> `14d`) and relative dates (`today`, `last two weeks`) are resolved from the
`RunClock`, a clock the run owns and freezes at its start, so one run never sees two "todays".

`ArgumentPolicy` applies both to a proposed call before it is validated: normalisers rewrite
values, slots pinned from the request fill missing arguments and refuse contradicting ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ..tools import Tool, ToolResult

# -- the run's clock ----------------------------------------------------------------------------


class RunClock:
    """`now` is read once, when the run starts; every relative date in the run resolves from it."""

    def __init__(self, now: datetime | Callable[[], datetime] | None = None) -> None:
        if now is None:
            moment = datetime.now(UTC)
        elif isinstance(now, datetime):
            moment = now
        else:
            moment = now()
        self._now = moment

    def now(self) -> datetime:
        return self._now

    def today(self) -> date:
        return self._now.date()


# -- parsing durations and dates ------------------------------------------------------------------

_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fourteen": 14,
    "thirty": 30,
    "ninety": 90,
}
_UNIT_DAYS = {"d": 1, "day": 1, "w": 7, "wk": 7, "week": 7, "m": 30, "mo": 30, "month": 30, "y": 365, "year": 365}
_UNIT_ALIASES = {"days": "day", "weeks": "week", "wks": "wk", "months": "month", "mos": "mo", "years": "year"}
_NUMBER_WORD = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_UNIT = r"(days?|d|weeks?|wks?|wk|w|months?|mos?|m|years?|y)"
# Digits may touch their unit (`2w`); a number word needs a separator (`two weeks`), or `and` would be "a" "nd".
_NUMBER_AND_UNIT = rf"(?:(\d+)[\s_-]*|({_NUMBER_WORD})[\s_-]+){_UNIT}"
_DURATION = re.compile(rf"\b{_NUMBER_AND_UNIT}\b", re.IGNORECASE)
_BARE_UNIT = re.compile(r"\b(?:last|past|previous|this)[\s_-]+(day|week|fortnight|month|year)\b", re.IGNORECASE)
_FORTNIGHT = re.compile(r"\bfortnight\b", re.IGNORECASE)


def parse_duration_days(text: str) -> int | None:
    """Days in the first duration named in `text` (`2w`, `two_weeks`, `14 days`, `last month`)."""
    match = _DURATION.search(text)
    if match:
        number, unit = (match.group(1) or match.group(2)).lower(), match.group(3).lower()
        count = int(number) if number.isdigit() else _NUMBER_WORDS[number]
        return count * _UNIT_DAYS[_UNIT_ALIASES.get(unit, unit)]
    bare = _BARE_UNIT.search(text)
    if bare:
        unit = bare.group(1).lower()
        return 14 if unit == "fortnight" else _UNIT_DAYS[unit]
    if _FORTNIGHT.search(text):
        return 14
    return None


_RELATIVE_DAY_OFFSETS = {"today": 0, "now": 0, "tonight": 0, "this morning": 0, "yesterday": -1, "tomorrow": 1}
_AGO = re.compile(rf"\b{_NUMBER_AND_UNIT}[\s_-]+ago\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def resolve_date(text: str, clock: RunClock) -> date | None:
    """A date named in `text`: ISO (`2026-11-20`), `today`, `yesterday`, `3 days ago`; else None."""
    iso = _ISO_DATE.search(text)
    if iso:
        try:
            return date(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
        except ValueError:
            return None
    lowered = text.lower()
    ago = _AGO.search(lowered)
    if ago:
        days = parse_duration_days(ago.group(0)[: -len("ago")])
        return clock.today() - timedelta(days=days or 0)
    for word, offset in _RELATIVE_DAY_OFFSETS.items():
        if re.search(rf"\b{word}\b", lowered):
            return clock.today() + timedelta(days=offset)
    return None


@dataclass(frozen=True)
class DateRange:
    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


def resolve_range(text: str, clock: RunClock) -> DateRange | None:
    """`last two weeks` -> the 14 days ending today (inclusive), from the run's clock."""
    days = parse_duration_days(text)
    if days is None:
        return None
    end = clock.today()
    return DateRange(end - timedelta(days=days - 1), end)


# -- normalisers ---------------------------------------------------------------------------------

Normaliser = Callable[[Any, RunClock], Any]
"""Maps a proposed value to its canonical form; returns the value unchanged when it cannot
(the schema then says what was expected)."""


def _key(value: str) -> str:
    return re.sub(r"[\s_-]+", " ", value.strip().lower())


@dataclass(frozen=True)
class EnumSlot:
    """An enum with synonyms; durations map onto choices like `7d` / `14d` / `30d` by days."""

    choices: tuple[str, ...]
    synonyms: Mapping[str, str] = field(default_factory=dict)
    durations: bool = False

    def canonical(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        if value in self.choices:
            return value
        key = _key(value)
        for choice in self.choices:
            if _key(choice) == key:
                return choice
        for synonym, choice in self.synonyms.items():
            if _key(synonym) == key:
                return choice
        if self.durations:
            days = parse_duration_days(value)
            by_days = {parse_duration_days(choice): choice for choice in self.choices}
            if days is not None and days in by_days:
                return by_days[days]
        return None

    def __call__(self, value: Any, clock: RunClock) -> Any:
        found = self.canonical(value)
        return value if found is None else found

    def extract(self, text: str, clock: RunClock) -> str | None:
        """The choice the request names, if it names exactly one (synonyms and durations count)."""
        found = {self.canonical(text)} if self.canonical(text) else set()
        for phrase in [*self.choices, *self.synonyms]:
            if re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text, re.IGNORECASE):
                found.add(self.canonical(phrase))
        if self.durations and (match := _DURATION.search(text) or _BARE_UNIT.search(text)):
            found.add(self.canonical(match.group(0)))
        found.discard(None)
        return found.pop() if len(found) == 1 else None


def period_slot(choices: Sequence[str] = ("1d", "7d", "14d", "30d", "90d", "365d")) -> EnumSlot:
    """A reporting period: `2w`, `two_weeks`, `14 days`, `last two weeks`, `fortnight` -> `14d`."""
    return EnumSlot(tuple(choices), durations=True)


def iso_date(value: Any, clock: RunClock) -> Any:
    """Normaliser: `today`, `yesterday`, `3 days ago`, `2026-11-20` -> an ISO date string."""
    if not isinstance(value, str):
        return value
    resolved = resolve_date(value, clock)
    return value if resolved is None else resolved.isoformat()


def start_date(value: Any, clock: RunClock) -> Any:
    """Normaliser for a `since`/`start` argument: a named date, or the first day of a named
    recent period (`last two weeks` -> 13 days before today), as an ISO date string."""
    if not isinstance(value, str):
        return value
    named = resolve_date(value, clock)
    if named is not None:
        return named.isoformat()
    period = resolve_range(value, clock)
    return value if period is None else period.start.isoformat()


# -- slots read from the request -----------------------------------------------------------------

Extractor = Callable[[str, RunClock], Any]


def regex_extractor(pattern: str, group: int | str = 0, convert: Callable[[str], Any] = str) -> Extractor:
    compiled = re.compile(pattern, re.IGNORECASE)

    def extract(text: str, clock: RunClock) -> Any:
        match = compiled.search(text)
        return convert(match.group(group)) if match else None

    return extract


def date_extractor(text: str, clock: RunClock) -> str | None:
    resolved = resolve_date(text, clock)
    return resolved.isoformat() if resolved else None


@dataclass(frozen=True)
class SlotSpec:
    """A value the intent needs. Read from the request by code; when `pin`, it fixes the tool
    arguments named in `args` (default: the slot's name) for the whole run."""

    name: str
    extract: Extractor
    required: bool = False
    question: str | None = None
    pin: bool = True
    args: tuple[str, ...] = ()

    @property
    def arg_names(self) -> tuple[str, ...]:
        return self.args or (self.name,)

    def ask(self) -> str:
        return self.question or f"Please tell me the {self.name.replace('_', ' ')}."


def pinned_arguments(slots: Iterable[SlotSpec], values: Mapping[str, Any]) -> dict[str, Any]:
    """Argument -> pinned value, for the pinned slots the request filled."""
    return {arg: values[s.name] for s in slots if s.pin and values.get(s.name) is not None for arg in s.arg_names}


# -- applying slots to a proposed call -----------------------------------------------------------


@dataclass
class Prepared:
    arguments: Any
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """argument -> (proposed, used), for every value code rewrote or filled in."""
    refusal: ToolResult | None = None


@dataclass
class ArgumentPolicy:
    """Normalisers keyed by argument name or `tool.argument`; pinned values keyed by argument."""

    clock: RunClock = field(default_factory=RunClock)
    normalisers: dict[str, Normaliser] = field(default_factory=dict)
    pinned: dict[str, Any] = field(default_factory=dict)

    def extend(self, normalisers: Mapping[str, Normaliser], pinned: Mapping[str, Any]) -> None:
        self.normalisers.update(normalisers)
        self.pinned.update(pinned)

    @property
    def active(self) -> bool:
        """Whether there is anything to normalise or pin (else `prepare` leaves arguments as they are)."""
        return bool(self.normalisers or self.pinned)

    def prepare(self, tool: Tool, arguments: Any) -> Prepared:
        if not isinstance(arguments, dict) or not (self.normalisers or self.pinned):
            return Prepared(arguments)
        fields = tool.args_model.model_fields
        out, changed = dict(arguments), {}
        for name in fields:
            normaliser = self.normalisers.get(f"{tool.qualified_name}.{name}") or self.normalisers.get(name)
            if normaliser is not None and name in out:
                value = _safe_normalise(normaliser, out[name], self.clock)
                if value != out[name]:
                    changed[name] = (out[name], value)
                    out[name] = value
            if name not in self.pinned:
                continue
            pinned = self.pinned[name]
            if name not in out:
                changed[name] = (None, pinned)
                out[name] = pinned
            elif out[name] != pinned:
                return Prepared(out, changed, _pin_refusal(tool, name, pinned, arguments[name]))
        return Prepared(out, changed)


def _safe_normalise(normaliser: Normaliser, value: Any, clock: RunClock) -> Any:
    try:
        return normaliser(value, clock)
    except Exception:  # a broken normaliser leaves the value to the schema check
        return value


def _pin_refusal(tool: Tool, name: str, pinned: Any, got: Any) -> ToolResult:
    return ToolResult.failure(
        "invalid_arguments",
        f"argument '{name}': fixed to {pinned!r} by the request (got {got!r})",
        user_action=f"call {tool.wire_name} again with {name}={pinned!r}, or leave {name} out",
        data={"errors": [{"field": name, "expected": pinned, "got": got}]},
    )
