"""The healthy workload the overhead benchmarks share: a model that reads a log in N segments
(with a line of narration each), then answers. Model and tools are instant, so what is measured
is the runtime's own cost."""

from __future__ import annotations

import asyncio

from loopwarden import FunctionModel, ModelReply, ModelRequest, call, tool

LINES = [f"sample {i}: flow {i * 0.37:.2f} L/min at {20 + i % 7} C" for i in range(10_000)]


@tool
def read_lines(offset: int, limit: int = 20) -> str:
    """Read lines of the log."""
    return "\n".join(LINES[offset : offset + limit])


def reader(rounds: int, narration: str = "Reading block {n}.", *, waits: bool = False) -> FunctionModel:
    """`narration` is formatted with the block number `n`: distinct text every round. With
    `waits`, each reply first yields to the event loop once, as a real client does while its
    request is in flight (an instant model that never waits lets the runtime batch more)."""

    answered = 0  # tool results so far: one per reply (counted here, not by scanning the history, so
    # the model's own cost stays flat however long the run)

    def reply(request: ModelRequest) -> ModelReply | str:
        nonlocal answered
        n, answered = answered, answered + 1
        if n >= rounds:
            return "Flow rose with every sample."
        return ModelReply(text=narration.format(n=n), tool_calls=[call("read_lines", {"offset": 20 * n})])

    async def waiting_reply(request: ModelRequest) -> ModelReply | str:
        await asyncio.sleep(0)
        return reply(request)

    return FunctionModel(waiting_reply if waits else reply)
