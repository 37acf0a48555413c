"""Slots decided by code: durations, relative dates from the run's clock, enum synonyms, and
the argument policy that applies them to a proposed call."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwarden import tool
from loopwarden.policy.slots import (
    ArgumentPolicy,
    EnumSlot,
    RunClock,
    SlotSpec,
    date_extractor,
    iso_date,
    parse_duration_days,
    period_slot,
    pinned_arguments,
    regex_extractor,
    resolve_date,
    resolve_range,
    start_date,
)

CLOCK = RunClock(datetime(2026, 11, 29, 23, 50, tzinfo=UTC))


def test_the_clock_is_read_once_at_start() -> None:
    ticks = iter([datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)])
    clock = RunClock(lambda: next(ticks))
    assert clock.today() == date(2026, 1, 1)
    assert clock.today() == date(2026, 1, 1)  # still: one run, one "today"


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("2w", 14),
        ("two_weeks", 14),
        ("14 days", 14),
        ("14d", 14),
        ("last two weeks", 14),
        ("the past fortnight", 14),
        ("last week", 7),
        ("3 months", 90),
        ("a year", 365),
        ("1-day", 1),
    ],
)
def test_durations(text: str, days: int) -> None:
    assert parse_duration_days(text) == days


@pytest.mark.parametrize("text", ["", "and", "I am fine", "150/95", "show the trend"])
def test_no_duration(text: str) -> None:
    assert parse_duration_days(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("today", date(2026, 11, 29)),
        ("record today's reading", date(2026, 11, 29)),
        ("yesterday", date(2026, 11, 28)),
        ("tomorrow", date(2026, 11, 30)),
        ("3 days ago", date(2026, 11, 26)),
        ("two weeks ago", date(2026, 11, 15)),
        ("2026-02-03", date(2026, 2, 3)),
    ],
)
def test_relative_dates_resolve_from_the_run_clock(text: str, expected: date) -> None:
    assert resolve_date(text, CLOCK) == expected


def test_invalid_or_absent_dates_are_none() -> None:
    assert resolve_date("2026-02-31", CLOCK) is None
    assert resolve_date("some day", CLOCK) is None


def test_a_range_ends_today_inclusive() -> None:
    found = resolve_range("the last two weeks", CLOCK)
    assert found is not None
    assert found.end == date(2026, 11, 29) and found.start == date(2026, 11, 16) and found.days == 14
    assert resolve_range("no period here", CLOCK) is None


def test_enum_synonyms_map_to_the_canonical_value() -> None:
    period = period_slot(("7d", "14d", "30d"))
    for spelled in ("2w", "two_weeks", "14 days", "14D", "Two Weeks", "fortnight"):
        assert period(spelled, CLOCK) == "14d"
    assert period("5 days", CLOCK) == "5 days"  # no such choice: left for the schema to reject
    assert period(14, CLOCK) == 14
    status = EnumSlot(("open", "closed"), synonyms={"resolved": "closed", "in progress": "open"})
    assert status("Resolved", CLOCK) == "closed" and status("in_progress", CLOCK) == "open"


def test_enum_extract_needs_exactly_one_choice() -> None:
    period = period_slot(("7d", "14d", "30d"))
    assert period.extract("trend for the last two weeks", CLOCK) == "14d"
    assert period.extract("trend for 30d", CLOCK) == "30d"
    assert period.extract("compare 7d with 30d", CLOCK) is None
    assert period.extract("trend please", CLOCK) is None


def test_iso_date_normaliser() -> None:
    assert iso_date("today", CLOCK) == "2026-11-29"
    assert iso_date("2 days ago", CLOCK) == "2026-11-27"
    assert iso_date("whenever", CLOCK) == "whenever"
    assert iso_date(None, CLOCK) is None


def test_start_date_normaliser() -> None:
    assert start_date("last two weeks", CLOCK) == "2026-11-16"
    assert start_date("yesterday", CLOCK) == "2026-11-28"
    assert start_date("2026-01-05", CLOCK) == "2026-01-05"
    assert start_date("the beginning", CLOCK) == "the beginning"


def test_extractors() -> None:
    reading = regex_extractor(r"\b(\d{2,3})/(\d{2,3})\b", group=1, convert=int)
    assert reading("bp 150/95 today", CLOCK) == 150
    assert reading("no numbers", CLOCK) is None
    assert date_extractor("log it for yesterday", CLOCK) == "2026-11-28"


@tool
def get_trend(metric: str, period: Literal["7d", "14d", "30d"], since: str | None = None) -> str:
    """A trend."""
    return "ok"


def policy(**pinned: object) -> ArgumentPolicy:
    p = ArgumentPolicy(CLOCK)
    p.extend({"period": period_slot(("7d", "14d", "30d")), "get_trend.since": iso_date}, pinned)
    return p


def test_policy_normalises_and_records_changes() -> None:
    prepared = policy().prepare(get_trend, {"metric": "bp", "period": "2w", "since": "yesterday"})
    assert prepared.refusal is None
    assert prepared.arguments == {"metric": "bp", "period": "14d", "since": "2026-11-28"}
    assert prepared.changed == {"period": ("2w", "14d"), "since": ("yesterday", "2026-11-28")}


def test_policy_fills_a_missing_pinned_argument() -> None:
    prepared = policy(period="14d").prepare(get_trend, {"metric": "bp"})
    assert prepared.arguments == {"metric": "bp", "period": "14d"} and prepared.refusal is None


def test_policy_refuses_a_contradicting_value_naming_field_and_expected() -> None:
    prepared = policy(period="14d").prepare(get_trend, {"metric": "bp", "period": "30d"})
    assert prepared.refusal is not None and prepared.refusal.error_type == "invalid_arguments"
    assert prepared.refusal.data == {"errors": [{"field": "period", "expected": "14d", "got": "30d"}]}
    agreeing = policy(period="14d").prepare(get_trend, {"metric": "bp", "period": "two weeks"})
    assert agreeing.refusal is None and agreeing.arguments["period"] == "14d"


def test_policy_leaves_non_objects_and_other_tools_alone() -> None:
    assert policy(period="14d").prepare(get_trend, "not json").arguments == "not json"

    @tool
    def unrelated(text: str) -> str:
        """No period here."""
        return text

    assert policy(period="14d").prepare(unrelated, {"text": "2w"}).arguments == {"text": "2w"}


def test_a_broken_normaliser_leaves_the_value() -> None:
    def explode(value: object, clock: RunClock) -> object:
        raise RuntimeError("bug")

    p = ArgumentPolicy(CLOCK, normalisers={"metric": explode})
    assert p.prepare(get_trend, {"metric": "bp", "period": "7d"}).arguments["metric"] == "bp"


def test_pinned_arguments_from_slots() -> None:
    slots = [
        SlotSpec("reading", regex_extractor(r"\d+/\d+"), args=("value", "raw")),
        SlotSpec("period", period_slot().extract),
        SlotSpec("note", regex_extractor("x"), pin=False),
    ]
    assert pinned_arguments(slots, {"reading": "150/95", "period": None, "note": "x"}) == {
        "value": "150/95",
        "raw": "150/95",
    }


@given(st.text(max_size=60))
def test_parsers_never_raise(text: str) -> None:
    parse_duration_days(text)
    resolve_date(text, CLOCK)
    period_slot().extract(text, CLOCK)
    iso_date(text, CLOCK)


@given(st.integers(min_value=1, max_value=400), st.sampled_from(["d", " days", "_days", "-day"]))
def test_any_day_count_round_trips(n: int, unit: str) -> None:
    assert parse_duration_days(f"{n}{unit}") == n
    found = resolve_range(f"last {n}{unit}", CLOCK)
    assert found is not None and found.days == n and found.end - found.start == timedelta(days=n - 1)
