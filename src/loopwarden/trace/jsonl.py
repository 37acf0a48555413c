"""JSONL traces: one event per line, in sequence order. Written from a run's events or from
the run store, read back into typed events (unknown types stay plain `Event`s)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import IO

from ..errors import TraceFormatError as TraceFormatError  # its home is loopwarden.errors
from ..events import Event, parse_event
from .store import RunStore


def write_events(events: Iterable[Event], out: IO[str]) -> int:
    """Write events as JSON lines; returns how many."""
    n = 0
    for event in events:
        out.write(event.to_json() + "\n")
        n += 1
    return n


def write_jsonl(events: Iterable[Event], path: Path) -> int:
    """Write a trace file atomically (a reader never sees half a trace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        n = write_events(events, out)
    tmp.replace(path)
    return n


def iter_jsonl(path: Path) -> Iterator[Event]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                yield parse_event(data)
            except ValueError as error:
                raise TraceFormatError(f"{path}:{number}: {error}") from None


def read_jsonl(path: Path) -> list[Event]:
    return list(iter_jsonl(path))


def export_run(store: RunStore, run_id: str, path: Path) -> int:
    """A stored run's events as a JSONL file, exactly as they were committed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        rows = store.event_rows(run_id)
        for row in rows:
            out.write(row.data + "\n")
    tmp.replace(path)
    return len(rows)


async def tee_jsonl(events: AsyncIterator[Event], path: Path) -> AsyncIterator[Event]:
    """Pass events through while appending each to `path` (flushed per event, so a crash
    keeps everything up to the last event)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        async for event in events:
            out.write(event.to_json() + "\n")
            out.flush()
            yield event
