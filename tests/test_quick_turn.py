"""The fused turn (`Run._quick`: one allowed call, run inline by the plain executor) against the
general one: the same events, messages, state and outcome, turn by turn, in runs that take it,
leave it (repeats, refusals, detectors stepping in, retries, a terminal tool, a checklist) or mix."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from loopwarden import Agent, ChecklistItem, FunctionModel, LoopConfig, RunContext, tool
from loopwarden.executor import RetryPolicy
from loopwarden.loop import Run
from loopwarden.models.base import ModelReply, ModelRequest, ToolCall

Step = tuple[str, dict[str, Any]] | str


def _script(steps: list[Step]) -> Callable[[ModelRequest], ModelReply | str]:
    """Replies by turn (the assistant messages so far); call ids fixed, so two runs compare."""

    def reply(request: ModelRequest) -> ModelReply | str:
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        step = steps[turn] if turn < len(steps) else "done"
        if isinstance(step, str):
            return step
        name, args = step
        return ModelReply(tool_calls=[ToolCall(id=f"c{turn}", name=name, arguments=json.dumps(args))])

    return reply


def _tools() -> list[Any]:
    flaky = {"left": 1}

    @tool(blocking=False)
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}" if path != "empty" else ""

    @tool(blocking=False)
    def fails(path: str) -> dict[str, Any]:
        """A business failure."""
        return {"ok": False, "error": "denied", "path": path}

    @tool(blocking=False)
    def raises(path: str) -> str:
        """Raises."""
        raise ValueError(f"bad {path}")

    @tool(blocking=False)
    def flaky_read(path: str) -> str:
        """Fails once with a connection error, then reads."""
        if flaky["left"]:
            flaky["left"] -= 1
            raise ConnectionError("reset")
        return f"read {path}"

    @tool(blocking=False)
    def whoami(ctx: RunContext[str], path: str) -> str:
        """Reads the run's deps."""
        return f"{ctx.deps} {ctx.turn} {path}"

    @tool(blocking=False, terminal=True)
    def submit(answer: str) -> str:
        """Ends the phase."""
        return answer

    @tool
    async def slow(path: str) -> str:
        """Async: never fused."""
        return path

    @tool(blocking=False, requires_approval=True)
    def guarded(path: str) -> str:
        """Needs approval."""
        return path

    return [read, fails, raises, flaky_read, whoami, submit, slow, guarded]


SCRIPTS: dict[str, list[Step]] = {
    "distinct reads": [("read", {"path": f"part-{i}.txt"}) for i in range(12)],
    "repeats": [("read", {"path": "a"})] * 7,
    "a cycle": [("read", {"path": "a"}), ("read", {"path": "b"}), ("read", {"path": "c"})] * 5,
    "failures": [("fails", {"path": "x"}), ("raises", {"path": "y"})] * 3 + [("raises", {"path": "y"})] * 3,
    "no progress": [("read", {"path": "empty"}), ("read", {"path": "./empty"})] * 4,
    "refusals": [("nope", {}), ("read", {"wrong": 1}), ("read", "not json"), ("read", {"path": "z"})],  # type: ignore[list-item]
    "retry": [("flaky_read", {"path": "r"}), ("read", {"path": "s"})],
    "context": [("whoami", {"path": "w"}), ("whoami", {"path": "v"})],
    "mixed": [("slow", {"path": "p"}), ("read", {"path": "q"}), ("guarded", {"path": "g"}), ("read", {"path": "t"})],
    "terminal": [("read", {"path": "a"}), ("submit", {"answer": "42"})],
    "checklist": [("read", {"path": "a"}), ("read", {"path": "notes"}), "the notes say 42"],
}


def _fixed(item: Any) -> Any:
    """An event or message as data, less what differs from run to run (times, durations)."""
    if isinstance(item, dict):
        return {k: _fixed(v) for k, v in item.items() if k not in ("ts", "duration_ms", "duration_s")}
    return [_fixed(v) for v in item] if isinstance(item, list) else item


async def _run(name: str, fused: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    taken = 0
    quick = Run._quick

    def counted(self: Run, p: Any) -> bool:
        nonlocal taken
        found = quick(self, p) if fused else False
        taken += found
        return found

    monkeypatch.setattr(Run, "_quick", counted)
    checklist = [ChecklistItem("notes", "read", when=lambda args, result: args.get("path") == "notes")]
    agent: Agent[Any, Any] = Agent(
        FunctionModel(_script(SCRIPTS[name]), name="m"),
        _tools(),
        config=LoopConfig(retry=RetryPolicy(base_delay=0.0, jitter="none")),
        checklist=checklist if name == "checklist" else (),
    )
    result = await agent.run("go", run_id="r", deps="d")
    return result, taken


@pytest.mark.parametrize("name", sorted(SCRIPTS))
async def test_the_fused_turn_gives_what_the_general_turn_gives(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fused, taken = await _run(name, True, monkeypatch)
    general, none = await _run(name, False, monkeypatch)
    assert none == 0 and taken > 0  # the fused way was taken in the one run and not in the other
    assert [_fixed(e.model_dump()) for e in fused.events] == [_fixed(e.model_dump()) for e in general.events]
    assert _fixed(fused.messages) == _fixed(general.messages)
    assert (fused.stop_reason, fused.output) == (general.stop_reason, general.output)
    assert _fixed(fused.totals.model_dump()) == _fixed(general.totals.model_dump())


def test_an_object_as_sent_is_read_as_parse_arguments_reads_it() -> None:
    from loopwarden.hotpath.fastjson import json_object
    from loopwarden.models.arguments import Parsed, parse_arguments

    texts = ['{"a": 1}', '{}', '{"a": {"b": [1, 2.5, null]}, "c": "d"}', '{"a": NaN}', '{"a": 1, "a": 2}', " {}",
             "{} ", '{"a": 1}}', '{"a": "x\ny"}', '"{\\"a\\": 1}"', "[1]", "", "{", "}", "{ }", "x{}",
             '{"a": 1} {"b": 2}', "{" + '"a":[' * 3000 + "]" * 3000 + "}"]  # fmt: skip
    read = 0
    for text in texts:
        found = json_object(text)
        if found is not None:
            read += 1
            assert parse_arguments(text) == Parsed(found, None, None), text
        else:
            assert text in texts[5:], text  # only what is no object as sent goes the long way
    assert json_object(None) is None and read == 6
