"""The seed-002 trace: "record today's reading 150/95 and show the trend for the last two weeks".

Routed by code to an intent with two tools, `period` fixed to 14d by code, the date resolved
from the run's clock, the checklist ending the run after two calls. The tools are real
functions over a real SQLite file; only the model is scripted."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest

from loopwarden import Agent, ChecklistItem, ScriptedModel, ToolRegistry, call, tool
from loopwarden.events import Event, GuardVerdict, IntentRouted, ModelCalled, RunFinished, ToolCallFinished
from loopwarden.policy.router import Intent, RuleRouter
from loopwarden.policy.slots import SlotSpec, date_extractor, iso_date, period_slot, regex_extractor

NOW = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
TODAY = NOW.date()
PROMPT = "record today's reading 150/95 and show the trend for the last two weeks"
Metric = Literal["blood_pressure", "weight", "glucose"]
Period = Literal["7d", "14d", "30d", "90d"]


class MetricStore:
    """Readings in SQLite, and a log of every tool execution (to prove what ran)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE readings (metric TEXT, value TEXT, day TEXT)")
        for back in (20, 12, 5):  # one reading outside the two weeks, two inside
            self.db.execute(
                "INSERT INTO readings VALUES (?, ?, ?)",
                ("blood_pressure", f"{140 - back}/90", (TODAY - timedelta(days=back)).isoformat()),
            )
        self.db.commit()
        self.executed: list[tuple[str, dict[str, Any]]] = []

    def registry(self) -> ToolRegistry:
        @tool(side_effect="write")
        def record_metric(metric: Metric, value: str, date: str) -> dict[str, Any]:
            """Record one reading of a health metric.

            Args:
                metric: which metric
                value: the reading, e.g. 150/95 for blood pressure
                date: ISO date of the reading
            """
            self.executed.append(("record_metric", {"metric": metric, "value": value, "date": date}))
            self.db.execute("INSERT INTO readings VALUES (?, ?, ?)", (metric, value, date))
            self.db.commit()
            return {"recorded": True, "metric": metric, "value": value, "date": date}

        @tool
        def get_metric_trend(metric: Metric, period: Period) -> dict[str, Any]:
            """The readings of a metric over a period ending today.

            Args:
                metric: which metric
                period: how far back
            """
            self.executed.append(("get_metric_trend", {"metric": metric, "period": period}))
            start = (TODAY - timedelta(days=int(period[:-1]) - 1)).isoformat()
            rows = self.db.execute(
                "SELECT day, value FROM readings WHERE metric = ? AND day >= ? ORDER BY day", (metric, start)
            ).fetchall()
            return {"metric": metric, "period": period, "points": [{"day": d, "value": v} for d, v in rows]}

        @tool
        def show_ui_card(title: str, body: str) -> str:
            """Show a card with a title and body in the app's UI."""
            self.executed.append(("show_ui_card", {"title": title}))
            return "shown"

        @tool
        def list_metrics() -> list[str]:
            """The metrics that can be recorded."""
            return ["blood_pressure", "weight", "glucose"]

        return ToolRegistry([record_metric, get_metric_trend, show_ui_card, list_metrics])


RECORD_AND_TREND = Intent(
    name="record_and_trend",
    description="record a reading, then show the metric's trend",
    tools=("record_metric", "get_metric_trend"),
    slots=(
        SlotSpec("period", period_slot(("7d", "14d", "30d", "90d")).extract),
        SlotSpec("date", date_extractor),
        SlotSpec("reading", regex_extractor(r"\b\d{2,3}/\d{2,3}\b"), required=True, args=("value",)),
    ),
    checklist=(
        ChecklistItem("recorded", "record_metric"),
        ChecklistItem("trend loaded", "get_metric_trend"),
    ),
    max_tool_rounds=6,
    normalisers={"period": period_slot(("7d", "14d", "30d", "90d")), "date": iso_date},
    keywords=("reading", "trend"),
    requires=(r"\b(record|log)\b", r"\btrend\b"),
)
QUERY_TREND = Intent(
    name="query_trend",
    tools=("get_metric_trend",),
    slots=(SlotSpec("period", period_slot(("7d", "14d", "30d", "90d")).extract),),
    max_tool_rounds=3,
    keywords=("trend", "show"),
    requires=(r"\btrend\b",),
    excludes=(r"\b(record|log)\b",),
)
SHOW_CARD = Intent(name="show_card", tools=("show_ui_card",), keywords=("card", "dashboard"))
ROUTER = RuleRouter([RECORD_AND_TREND, QUERY_TREND, SHOW_CARD])

RECORD = call("record_metric", {"metric": "blood_pressure", "value": "150/95", "date": "today"})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetricStore]:
    s = MetricStore(tmp_path / "metrics.sqlite")
    yield s
    s.db.close()


def agent(store: MetricStore, replies: list[Any]) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(replies)
    return Agent(model, store.registry(), router=ROUTER, clock=lambda: NOW), model


def of(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


async def test_seed_002_routes_pins_period_and_ends_on_the_checklist(store: MetricStore) -> None:
    a, _ = agent(
        store,
        [
            RECORD,
            call("get_metric_trend", {"metric": "blood_pressure", "period": "14d"}),
            # Asked for its final answer, the model tries one more, wider trend call.
            call("get_metric_trend", {"metric": "blood_pressure", "period": "30d"}),
        ],
    )
    result = await a.run(PROMPT)

    routed = of(result.events, IntentRouted)[0]
    assert routed.intent == "record_and_trend"
    assert routed.pinned["period"] == "14d"
    assert routed.pinned["date"] == TODAY.isoformat()
    assert routed.pinned["value"] == "150/95"

    calls = of(result.events, ModelCalled)
    assert [c.tools_offered for c in calls[:2]] == [["record_metric", "get_metric_trend"]] * 2
    assert all("show_ui_card" not in c.tools_offered for c in calls)
    assert [c.n_tools_offered for c in calls] == [2, 2, 0]

    assert result.status == "completed" and result.stop_reason == "checklist_complete"
    assert result.state.checklist is not None and result.state.checklist.complete
    assert result.totals.tool_executions == 2
    assert store.executed == [
        ("record_metric", {"metric": "blood_pressure", "value": "150/95", "date": "2026-11-29"}),
        ("get_metric_trend", {"metric": "blood_pressure", "period": "14d"}),
    ]
    refused = [v for v in of(result.events, GuardVerdict) if v.detector == "no_tools_phase"]
    assert refused and refused[0].evidence == ["get_metric_trend"]
    trend = [r for r in of(result.events, ToolCallFinished) if r.tool == "get_metric_trend"]
    assert len(trend) == 1 and trend[0].ok
    # The trend holds the readings of the last 14 days only, today's included.
    assert "2026-11-17" in trend[0].preview and "2026-11-09" not in trend[0].preview
    assert "150/95" in trend[0].preview


async def test_a_contradicting_period_is_refused_naming_the_field(store: MetricStore) -> None:
    a, _ = agent(
        store,
        [
            RECORD,
            call("get_metric_trend", {"metric": "blood_pressure", "period": "30d"}),
            call("get_metric_trend", {"metric": "blood_pressure", "period": "14d"}),
            "done",
        ],
    )
    result = await a.run(PROMPT)

    results = of(result.events, ToolCallFinished)
    wrong = next(r for r in results if r.tool == "get_metric_trend")
    assert not wrong.ok and not wrong.executed
    assert wrong.error_type == "invalid_arguments"
    assert "period" in (wrong.message or "") and "14d" in (wrong.message or "")
    assert ("get_metric_trend", {"metric": "blood_pressure", "period": "30d"}) not in store.executed
    assert store.executed[-1] == ("get_metric_trend", {"metric": "blood_pressure", "period": "14d"})
    assert result.stop_reason == "checklist_complete"


@pytest.mark.parametrize("spelled", ["2w", "two_weeks", "14 days", "last two weeks", "fortnight", "14d"])
async def test_period_synonyms_are_normalised_by_code(store: MetricStore, spelled: str) -> None:
    replies: list[Any] = [
        [RECORD, call("get_metric_trend", {"metric": "blood_pressure", "period": spelled})],
        "Recorded; your pressure is trending up.",
    ]
    a, _ = agent(store, replies)
    result = await a.run(PROMPT)
    assert ("get_metric_trend", {"metric": "blood_pressure", "period": "14d"}) in store.executed
    assert result.totals.tool_rounds == 1 and result.totals.tool_executions == 2
    trend = next(r for r in of(result.events, ToolCallFinished) if r.tool == "get_metric_trend")
    assert "150/95" in trend.preview  # proposed in one turn, the write ran before the read
    verdict = next(v for v in of(result.events, GuardVerdict) if v.tool == "get_metric_trend")
    assert verdict.action == "allowed"
    if spelled != "14d":  # what code decided is told in the trace
        assert f"period='14d' (proposed {spelled!r})" in verdict.reason
    else:
        assert "period" not in verdict.reason
    assert result.stop_reason == "checklist_complete"


async def test_the_ui_card_tool_is_refused_as_not_allowed(store: MetricStore) -> None:
    a, _ = agent(store, [call("show_ui_card", {"title": "BP", "body": "150/95"}), RECORD, "ok"])
    result = await a.run(PROMPT)
    card = next(r for r in of(result.events, ToolCallFinished) if r.tool == "show_ui_card")
    assert card.error_type == "not_allowed" and not card.executed
    assert all(name != "show_ui_card" for name, _ in store.executed)


async def test_a_missing_reading_is_asked_for_without_calling_the_model(store: MetricStore) -> None:
    a, model = agent(store, ["never used"])
    result = await a.run("record my blood pressure and show the trend")
    assert result.status == "paused" and result.stop_reason == "clarification_needed"
    assert "reading" in str(result.output)
    assert model.calls == 0 and store.executed == []
    finished = of(result.events, RunFinished)
    assert len(finished) == 1 and result.events[-1] is finished[0]


async def test_the_query_intent_has_its_own_tool_round_budget(store: MetricStore) -> None:
    asks = [("blood_pressure", "7d"), ("weight", "7d"), ("glucose", "7d"), ("blood_pressure", "30d")]
    replies: list[Any] = [call("get_metric_trend", {"metric": m, "period": p}) for m, p in asks]
    a, _ = agent(store, [*replies, "Here is what I found."])
    result = await a.run("show the trend of my readings")
    assert of(result.events, IntentRouted)[0].intent == "query_trend"
    assert result.stop_reason == "intent_tool_round_budget" and result.status == "degraded"
    assert result.totals.tool_rounds == 3
    assert len(store.executed) == 3
