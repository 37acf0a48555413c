"""The seed-002 request, decided by code before the first model call.

    python -m loopwarden.examples.metric_trend

"record today's reading 150/95 and show the trend for the last two weeks": a rule router picks
the intent (two tools, no UI card), `period` is pinned to 14d and the date resolved from the
run's clock, and the checklist ends the run. The scripted model makes the usual mistakes (a UI
card, a 30-day trend, "2w"); the trace shows what code did with each. Tools write real SQLite.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from rich.console import Console

from .. import Agent, ChecklistItem, Intent, RuleRouter, ScriptedModel, SlotSpec, ToolRegistry, call, period_slot, tool
from ..events import Event, GuardVerdict, IntentRouted, ModelCalled, RunFinished, ToolCallFinished
from ..policy.slots import date_extractor, iso_date, regex_extractor

REQUEST = "record today's reading 150/95 and show the trend for the last two weeks"
NOW = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
Metric = Literal["blood_pressure", "weight", "glucose"]
Period = Literal["7d", "14d", "30d", "90d"]
PERIODS = ("7d", "14d", "30d", "90d")


def metric_tools(db: sqlite3.Connection, today: datetime) -> ToolRegistry:
    @tool(side_effect="write")
    def record_metric(metric: Metric, value: str, date: str) -> dict[str, Any]:
        """Record one reading of a health metric.

        Args:
            metric: which metric
            value: the reading, e.g. 150/95 for blood pressure
            date: ISO date of the reading
        """
        db.execute("INSERT INTO readings VALUES (?, ?, ?)", (metric, value, date))
        db.commit()
        return {"recorded": True, "metric": metric, "value": value, "date": date}

    @tool
    def get_metric_trend(metric: Metric, period: Period) -> dict[str, Any]:
        """The readings of a metric over a period ending today.

        Args:
            metric: which metric
            period: how far back
        """
        start = (today.date() - timedelta(days=int(period[:-1]) - 1)).isoformat()
        rows = db.execute(
            "SELECT day, value FROM readings WHERE metric = ? AND day >= ? ORDER BY day", (metric, start)
        ).fetchall()
        return {"metric": metric, "period": period, "points": [{"day": d, "value": v} for d, v in rows]}

    @tool
    def show_ui_card(title: str, body: str) -> str:
        """Show a card with a title and body in the app's UI."""
        return "shown"

    return ToolRegistry([record_metric, get_metric_trend, show_ui_card])


def metric_router() -> RuleRouter:
    record_and_trend = Intent(
        "record_and_trend",
        description="record a reading, then show the metric's trend",
        tools=("record_metric", "get_metric_trend"),
        slots=(
            SlotSpec("period", period_slot(PERIODS).extract),
            SlotSpec("date", date_extractor),
            SlotSpec("reading", regex_extractor(r"\b\d{2,3}/\d{2,3}\b"), required=True, args=("value",)),
        ),
        checklist=(ChecklistItem("recorded", "record_metric"), ChecklistItem("trend loaded", "get_metric_trend")),
        max_tool_rounds=6,
        normalisers={"period": period_slot(PERIODS), "date": iso_date},
        keywords=("reading", "trend"),
        requires=(r"\b(record|log)\b", r"\btrend\b"),
    )
    query_trend = Intent(
        "query_trend",
        tools=("get_metric_trend",),
        slots=(SlotSpec("period", period_slot(PERIODS).extract),),
        max_tool_rounds=3,
        requires=(r"\btrend\b",),
        excludes=(r"\b(record|log)\b",),
    )
    return RuleRouter([record_and_trend, query_trend])


def clumsy_model() -> ScriptedModel:
    """Tries the UI card, a 30-day trend and "2w" before getting it right; then wants more."""
    record = call("record_metric", {"metric": "blood_pressure", "value": "150/95", "date": "today"})
    return ScriptedModel(
        [
            [call("show_ui_card", {"title": "BP", "body": "150/95"}), record],
            call("get_metric_trend", {"metric": "blood_pressure", "period": "30d"}),
            call("get_metric_trend", {"metric": "blood_pressure", "period": "2w"}),
            call("get_metric_trend", {"metric": "blood_pressure", "period": "30d"}),
        ],
        name="clumsy",
    )


def describe(console: Console, events: list[Event]) -> None:
    for event in events:
        if isinstance(event, IntentRouted):
            console.print(f"routed: [bold]{event.intent}[/] (confidence {event.confidence:.2f}) tools={event.tools}")
            console.print(f"  pinned by code: {event.pinned}")
        elif isinstance(event, ModelCalled):
            console.print(f"turn {event.turn}: model offered {event.n_tools_offered} tools {event.tools_offered}")
        elif isinstance(event, GuardVerdict):
            console.print(f"  {event.tool or ''} -> {event.action} ({event.detector}): {event.reason}")
        elif isinstance(event, ToolCallFinished):
            outcome = "ok" if event.ok else f"{event.error_type}: {event.message}"
            console.print(f"  {event.tool} {'ran' if event.executed else 'did not run'}: {outcome}")
        elif isinstance(event, RunFinished):
            console.print(f"finished: {event.status} ({event.stop_reason}), {event.totals.tool_executions} executions")


async def main() -> int:
    console = Console()
    with tempfile.TemporaryDirectory() as folder:
        db = sqlite3.connect(Path(folder) / "metrics.sqlite", check_same_thread=False)
        db.execute("CREATE TABLE readings (metric TEXT, value TEXT, day TEXT)")
        db.execute(
            "INSERT INTO readings VALUES ('blood_pressure', '138/88', ?)",
            ((NOW - timedelta(days=5)).date().isoformat(),),
        )
        agent = Agent(clumsy_model(), metric_tools(db, NOW), router=metric_router(), clock=lambda: NOW)
        console.rule(REQUEST)
        result = await agent.run(REQUEST)
        describe(console, result.events)
        today = (NOW.date().isoformat(),)
        recorded_today = db.execute("SELECT COUNT(*) FROM readings WHERE day = ?", today).fetchone()[0]
        db.close()
    ok = result.stop_reason == "checklist_complete" and result.totals.tool_executions == 2 and recorded_today == 1
    console.print(f"\nchecklist ended the run after two executions: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
