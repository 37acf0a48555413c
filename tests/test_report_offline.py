"""The offline explorer: follows truncated reads in segments, skips figures when they are off,
and answers a forced finish."""

from __future__ import annotations

import asyncio
from pathlib import Path

from loopwarden.events import Event, EventStamper
from loopwarden.models import ModelRequest
from loopwarden.report.events import ExplorationDone
from loopwarden.report.explore.loop import explore
from loopwarden.report.explore.offline import MAX_SEGMENTS, OfflineExplorer
from loopwarden.report.explore.tools import ExplorationContext
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.sandbox.isolation import Isolation
from loopwarden.report.sandbox.runner import FigureSandbox


def test_long_documents_are_read_in_segments(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "log.md").write_text("# Long log\n" + "".join(f"entry {i}: " + "w" * 120 + "\n" for i in range(300)))
    (data / "huge.txt").write_text("".join(f"{i} " + "q" * 200 + "\n" for i in range(2000)))
    model = OfflineExplorer()

    async def collect() -> list[Event]:
        return [
            e async for e in explore(data, tmp_path / "out", model, stamper=EventStamper("x"), scan=scan_folder(data))
        ]

    events = asyncio.run(collect())
    done = events[-1]
    assert isinstance(done, ExplorationDone)
    coverage = {e.path: e for e in done.record.coverage.files}
    assert coverage["log.md"].status == "read"  # about 38k characters: read in 6 segments
    offsets = [
        e.arguments.get("offset", 0)
        for e in events
        if e.type == "tool_call_proposed" and e.arguments.get("path") == "huge.txt"
    ]  # type: ignore[attr-defined]
    assert len(offsets) == MAX_SEGMENTS and offsets == sorted(offsets) and len(set(offsets)) == MAX_SEGMENTS
    assert coverage["huge.txt"].status == "partial"  # a cap per file: the step budget is shared
    assert done.record.experiment.startswith("Long log")


def test_forced_finish_and_no_tools(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("x,y\n1,2\n2,4\n3,6\n")
    scan = scan_folder(tmp_path)
    off = Isolation(landlock_abi=None, seccomp=False, bwrap=None)
    ctx = ExplorationContext(
        root=tmp_path, out_dir=tmp_path / "out", scan=scan, sandbox=FigureSandbox(tmp_path, tmp_path / "out", off)
    )
    model = OfflineExplorer()
    model.bind(ctx)
    finish = {"type": "function", "function": {"name": "finish_exploration", "arguments": "{}"}}
    tools = [{"type": "function", "function": {"name": n}} for n in ("list_dir", "read_file", "finish_exploration")]
    forced = asyncio.run(model.complete(ModelRequest(messages=[], tools=tools, tool_choice=finish)))
    assert [c.name for c in forced.tool_calls] == ["finish_exploration"]
    text = asyncio.run(model.complete(ModelRequest(messages=[])))
    assert text.text is not None and text.text.startswith("[offline explorer")


def test_a_big_folder_is_explored_within_the_tool_round_budget(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for i in range(120):
        folder = data / f"day{i // 20}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note{i:03d}.txt").write_text(f"observation {i}\n")
    for i in range(30):
        (data / f"run{i:02d}.csv").write_text("x,y\n" + "".join(f"{x},{x * (i + 1)}\n" for x in range(12)))
    model = OfflineExplorer()

    async def collect() -> list[Event]:
        return [
            e async for e in explore(data, tmp_path / "out", model, stamper=EventStamper("x"), scan=scan_folder(data))
        ]

    done = asyncio.run(collect())[-1]
    assert isinstance(done, ExplorationDone)
    assert not done.record.degraded and done.record.stop_reason == "terminal_tool"
    assert done.record.coverage.by_status("unread") == []
    assert len(done.record.tables) == 30
