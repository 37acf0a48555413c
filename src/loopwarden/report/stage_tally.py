"""Per stage of a report run: model calls (every request that reached the server), errors and
seconds, tallied from the events, for the summary. A stage that failed its model calls shows
it here, not only as a fallback further down."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..events import Event


@dataclass
class StageFigures:
    model_calls: int = 0
    errors: int = 0
    error_kinds: list[str] = field(default_factory=list)
    seconds: float = 0.0
    repaired_arguments: int = 0

    def describe(self) -> str:
        kinds = f" ({', '.join(sorted(set(self.error_kinds)))})" if self.error_kinds else ""
        repaired = f", {self.repaired_arguments} argument repair(s)" if self.repaired_arguments else ""
        return f"{self.model_calls} model calls, {self.errors} errors{kinds}, {self.seconds:.1f} s{repaired}"


@dataclass
class StageTally:
    stages: dict[str, StageFigures] = field(default_factory=dict)
    current: str | None = None
    began: float = 0.0
    models: set[str] = field(default_factory=set)
    """Names of the models that answered (the offline explorer's included)."""

    def add(self, event: Event) -> None:
        wanted = ("milestone", "model_failed", "tool_call_proposed")
        data: dict[str, Any] = event.model_dump() if event.type in wanted else {}
        if event.type == "milestone":
            stage = str(data["stage"])
            if data["state"] == "started":
                self.current, self.began = stage, event.ts
                self.stages.setdefault(stage, StageFigures())
            elif stage == self.current:
                self.stages.setdefault(stage, StageFigures()).seconds += max(event.ts - self.began, 0.0)
                self.current = None
            return
        figures = self.stages.setdefault(self.current or "other", StageFigures())
        if event.type == "model_called":
            figures.model_calls += int(getattr(event, "attempts", 1))
            self.models.add(str(getattr(event, "model", "")))
        elif event.type == "model_failed":
            figures.errors += 1
            figures.model_calls += int(data.get("attempts") or 0)
            figures.error_kinds.append(str(data.get("kind")))
        elif event.type == "tool_call_proposed" and data.get("repaired"):
            figures.repaired_arguments += 1

    def rows(self) -> list[tuple[str, str]]:
        """(stage, figures) for the stages that asked a model or failed."""
        return [(name, f.describe()) for name, f in self.stages.items() if f.model_calls or f.errors]

    @property
    def offline(self) -> bool:
        """No language model took part: only the offline explorer (or none) and the offline writer."""
        failed = any(f.errors for f in self.stages.values())
        return not failed and all(name.startswith("offline") for name in self.models)
