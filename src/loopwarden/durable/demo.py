"""A scripted job for trying durable runs (and for their tests and benchmark): an agent whose
model is a function of the conversation, like a real one, so a replay is asked nothing new.

`loopwarden serve --job loopwarden.durable.demo:demo_job` runs it on any folder holding a
`demo.json` (every key optional):

    {"turns": 6, "model_delay_s": 0.1, "calls_log": "calls.jsonl", "tools_log": "tools.jsonl",
     "hold_turn": 3, "release_file": "release", "approval_turn": null, "keys_log": null}

Turn k calls `lookup(item=k)`, except: turns 2, 5 and 6 repeat `lookup(item=1)` (the guard
answers the 2nd identical call from memory; the 3rd comes after the write of turn 3, so it runs
again and holds its rung; the 4th is steered, so a resumed run that forgot its ladder counts would
run it again), `hold_turn` calls `slow_write`, which waits for `release_file` to
exist, and `approval_turn` calls `approved_write` (needs approval). After `turns` it calls
`finish`. Each model request and each tool execution appends one JSON line to its log.
`keys_log` gets a line per start of the job with the SHA-256 of the endpoint key it was given.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..agent import Agent
from ..config import LoopConfig
from ..events import Event, EventStamper, RunFinished
from ..hooks import idempotency_key
from ..models.base import ModelReply, ModelRequest, ToolCall, Usage
from ..policy.approval import ApprovalGate
from ..report.events import ReportFinished
from ..tools import Tool, tool

REPEATED_TURNS = frozenset({2, 5, 6})
HOLD_POLL_S = 0.02


class DemoSpec(BaseModel):
    turns: int = 6
    model_delay_s: float = 0.0
    calls_log: Path | None = None
    tools_log: Path | None = None
    hold_turn: int | None = None
    release_file: Path | None = None
    approval_turn: int | None = None
    keys_log: Path | None = None
    """Each start of the job logs a digest of the endpoint key it was handed (secrets.py's test)."""

    @classmethod
    def load(cls, folder: Path) -> DemoSpec:
        spec = cls.model_validate_json((folder / "demo.json").read_text())
        resolve = {k: folder / v for k, v in spec.model_dump().items() if isinstance(v, Path) and not v.is_absolute()}
        return spec.model_copy(update=resolve)


def _append(log: Path | None, entry: dict[str, Any]) -> None:
    if log is None:
        return
    with log.open("a") as handle:  # one write per line, O_APPEND: lines never interleave
        handle.write(json.dumps(entry) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


class DemoModel:
    """Decides from the number of tool results so far; records every request it receives."""

    name = "demo-model"

    def __init__(self, spec: DemoSpec) -> None:
        self.spec = spec

    async def complete(self, request: ModelRequest) -> ModelReply:
        digest = hashlib.sha256(json.dumps(request.messages, sort_keys=True).encode()).hexdigest()[:16]
        turn = 1 + sum(1 for m in request.messages if m.get("role") == "assistant")
        _append(self.spec.calls_log, {"turn": turn, "request": digest, "pid": os.getpid()})
        if self.spec.model_delay_s:
            await asyncio.sleep(self.spec.model_delay_s)
        usage = Usage(prompt_tokens=10 * turn, completion_tokens=5)
        if not request.tools:
            return ModelReply(text=f"done after {turn - 1} turns", usage=usage, finish_reason="stop")
        name, args = self._choose(turn, {t["function"]["name"] for t in request.tools})
        call = ToolCall(id=f"call_{turn}", name=name, arguments=json.dumps(args))
        return ModelReply(tool_calls=[call], usage=usage, finish_reason="tool_calls")

    def _choose(self, turn: int, offered: set[str]) -> tuple[str, dict[str, Any]]:
        if turn > self.spec.turns or "lookup" not in offered:
            return "finish", {"summary": f"finished at turn {turn}"}
        if turn == self.spec.hold_turn:
            return "slow_write", {"item": turn}
        if turn == self.spec.approval_turn:
            return "approved_write", {"item": turn}
        if turn in REPEATED_TURNS:
            return "lookup", {"item": 1}
        return "lookup", {"item": turn}


def demo_tools(spec: DemoSpec) -> list[Tool]:
    def logged(name: str, item: int, phase: str) -> None:
        entry = {"tool": name, "item": item, "phase": phase, "key": idempotency_key(), "pid": os.getpid()}
        _append(spec.tools_log, entry)

    @tool
    def lookup(item: int) -> str:
        """Look an item up."""
        logged("lookup", item, "done")
        return f"item {item} is {item * item}"

    @tool(side_effect="write")
    async def slow_write(item: int) -> str:
        """Write an item; waits until released."""
        logged("slow_write", item, "started")
        while spec.release_file is not None and not spec.release_file.exists():
            await asyncio.sleep(HOLD_POLL_S)
        logged("slow_write", item, "done")
        return f"wrote {item}"

    @tool(side_effect="write", requires_approval=True)
    def approved_write(item: int) -> str:
        """Write an item once a person approves."""
        logged("approved_write", item, "done")
        return f"wrote {item} with approval"

    @tool(terminal=True)
    def finish(summary: str) -> str:
        """Finish with a summary."""
        logged("finish", 0, "done")
        return summary

    return [lookup, slow_write, approved_write, finish]


async def demo_job(
    config: Any, *, run_id: str | None = None, start_seq: int = 0, approvals: ApprovalGate | None = None
) -> AsyncIterator[Event]:
    """A server job: the demo agent's events, then `report_finished`."""
    spec = DemoSpec.load(Path(config.data_dir))
    key = getattr(getattr(config, "endpoint", None), "api_key", None)
    digest = hashlib.sha256(key.get_secret_value().encode()).hexdigest() if key is not None else None
    _append(spec.keys_log, {"key_sha256": digest, "pid": os.getpid()})
    stamp = EventStamper(run_id or "demo", start_seq)
    agent = Agent(DemoModel(spec), demo_tools(spec), approvals=approvals, config=LoopConfig(), trace=False)
    last: Event | None = None
    async for event in agent.stream("Work through the items.", stamper=stamp):
        last = event
        yield event
    assert isinstance(last, RunFinished)
    status = "completed" if last.status == "completed" else "degraded" if last.status == "degraded" else "failed"
    yield stamp(
        ReportFinished, status=status, stop_reasons=[last.stop_reason], totals=last.totals, message=str(last.output)
    )
