"""What a run costs besides its steps (bench/bench_step.py --fixed): each shortcut taken once per
run or per declaration gives what the general path gives."""

from __future__ import annotations

import dataclasses
import inspect
from collections import Counter
from typing import Any

import pytest
from pydantic import ValidationError

from loopwarden import Agent, Budgets, FunctionModel, LoopConfig, tool
from loopwarden.config import LoopConfig as Config
from loopwarden.ending import finished, started_event
from loopwarden.errors import ConfigError
from loopwarden.events import RunFinished, RunStarted, Totals
from loopwarden.guard import DEFAULT_DETECTORS, build_detectors, repetition
from loopwarden.guard.detector import Detector, hooked
from loopwarden.guard.ladder import Ladder, shared_ladder
from loopwarden.hotpath.frozen import quick_init
from loopwarden.hotpath.trusted import trusted
from loopwarden.loop import Run
from loopwarden.retry import RetryPolicy
from loopwarden.tools import Tool


def _twins(slots: bool) -> tuple[type[Any], type[Any]]:
    """One frozen dataclass with default factories, a field out of `__init__` and keyword-only
    fields, twice: with its generated __init__, and with quick_init's."""

    def make() -> type[Any]:
        field = dataclasses.field
        specs = [
            ("x", int),
            ("tags", list[str], field(default_factory=list)),
            ("weight", float, field(default=1.5)),
            ("seen", dict[str, int], field(default_factory=dict, init=False)),
            ("label", str, field(kw_only=True)),
            ("extra", list[int], field(default_factory=lambda: [1], kw_only=True)),
            ("note", str | None, field(default=None, kw_only=True)),
        ]
        return dataclasses.make_dataclass("Shape", specs, frozen=True, slots=slots)

    return make(), quick_init(make())


@pytest.mark.parametrize("slots", [True, False])
def test_quick_init_with_factories_and_keyword_only_fields_makes_what_the_generated_init_makes(slots: bool) -> None:
    plain, quick = _twins(slots)
    assert inspect.signature(quick) == inspect.signature(plain)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {"label": "a"}),
        ((1, ["t"]), {"label": "a", "extra": [2]}),
        ((), {"x": 3, "label": "b", "weight": 0.0, "note": "n"}),
        ((4, ["u"], 2.5), {"label": "c"}),
    ]
    for args, kwargs in calls:
        a, b = plain(*args, **kwargs), quick(*args, **kwargs)
        assert repr(a) == repr(b) and dataclasses.astuple(a) == dataclasses.astuple(b)
        assert a == plain(*args, **kwargs) and b == quick(*args, **kwargs)
        again, given = quick(*args, **kwargs), {*kwargs, *("x", "tags", "weight")[: len(args)]}
        for name in ("tags", "seen", "extra"):  # a factory's value is made per instance; a given one kept
            assert (getattr(again, name) is getattr(b, name)) == (name in given)
        if not slots:
            assert list(a.__dict__.items()) == list(b.__dict__.items())  # field order too
        with pytest.raises(dataclasses.FrozenInstanceError):
            b.x = 2
    for args, kwargs in [((1,), {}), ((1, [], 1.0, "a"), {}), ((1,), {"label": "a", "seen": {}}), ((), {"label": "a"})]:
        with pytest.raises(TypeError) as expected:
            plain(*args, **kwargs)
        with pytest.raises(TypeError) as got:
            quick(*args, **kwargs)
        assert str(got.value) == str(expected.value)


def _generated_twin(cls: type[Any]) -> type[Any]:
    """`cls` as a plain frozen dataclass again: the same fields, the generated __init__."""
    specs = []
    for f in dataclasses.fields(cls):
        options: dict[str, Any] = {"init": f.init, "kw_only": f.kw_only}
        if f.default_factory is not dataclasses.MISSING:
            options["default_factory"] = f.default_factory
        elif f.default is not dataclasses.MISSING:
            options["default"] = f.default
        specs.append((f.name, f.type, dataclasses.field(**options)))
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True)


@pytest.mark.parametrize("cls", [LoopConfig, Budgets, RetryPolicy, Ladder])
def test_the_configs_built_per_run_are_what_their_generated_init_makes(cls: type[Any]) -> None:
    twin = _generated_twin(cls)
    assert list(inspect.signature(cls).parameters) == list(inspect.signature(twin).parameters)
    assert dataclasses.astuple(cls()) == dataclasses.astuple(twin())
    first, second = cls(), cls()
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            assert getattr(first, f.name) is not getattr(second, f.name)  # each its own, as before
    assert LoopConfig(budgets=Budgets(max_tool_rounds=2)).budgets.max_tool_rounds == 2
    assert Config(policy="fail", ladder=Ladder(1, 2, 3)).ladder == Ladder(nudge_at=1, narrow_at=2, stop_at=3)


def test_a_declared_tool_is_what_the_generated_init_makes() -> None:
    def read(path: str) -> str:
        """Read a file."""
        return path

    declared = tool(read)
    twin = _generated_twin(Tool)
    fields = {f.name: getattr(declared, f.name) for f in dataclasses.fields(Tool) if f.init}
    assert dataclasses.astuple(Tool(**fields)) == dataclasses.astuple(twin(**fields))
    assert Tool(**fields).pace is not Tool(**fields).pace  # init=False, its own factory's value each


def test_shared_ladders_equal_the_ones_detectors_made() -> None:
    assert shared_ladder(1, 2, 3) == Ladder(nudge_at=1, narrow_at=2, stop_at=3)
    assert shared_ladder(3, 4, 5) is shared_ladder(3, 4, 5)
    made = {d.name: d.ladder for d in build_detectors(None)}  # type: ignore[attr-defined]
    assert made == {
        "cycle": Ladder(1, 2, 3),
        "error_loop": Ladder(3, 4, 5),
        "no_progress": Ladder(3, 4, 5),
        "repetition": Ladder(1, 2, 3),
        "monologue": Ladder(2, 3, 4),
    }


class _Quiet(Detector):
    name = "quiet"


class _OwnText(Detector):
    name = "own"

    def on_text(self, turn: int, text: str, tools_offered: bool, state: Any) -> None:
        return None


def _overriding(detectors: list[Detector], hook: str) -> list[Detector]:
    """The check `hooked` makes, one hook at a time (the loop's way before it)."""
    inert = getattr(Detector, hook)
    return [d for d in detectors if hook in getattr(d, "__dict__", ()) or getattr(type(d), hook, None) is not inert]


def test_hooked_is_overriding_for_each_hook() -> None:
    patched = _Quiet()
    patched.on_calls = lambda *args: None  # type: ignore[method-assign]  # an instance's own hook
    sets = [
        build_detectors(None),
        [],
        [_Quiet(), _OwnText(), patched, *build_detectors(None, {"cycle"})],
        [make() for make in DEFAULT_DETECTORS.values()][::-1],
    ]
    for detectors in sets:
        found = hooked(detectors)
        assert list(found) == ["on_calls", "on_results", "on_text"]
        for hook, chosen in found.items():
            assert chosen == _overriding(detectors, hook)


def _run(**config: Any) -> Run:
    agent: Agent[Any, Any] = Agent(FunctionModel(lambda request: "done", name="m"), [], config=LoopConfig(**config))
    run = Run(agent, "hello", "r1")
    run.offered = ["a", "b"]
    return run


def _as_validated(event: Any) -> Any:
    """The event built by validation from the same fields."""
    fields = {name: getattr(event, name) for name in event.model_fields_set}
    return type(event)(**fields)


def test_run_started_in_order_is_the_validated_event() -> None:
    run = _run()
    for intent in (None, "lookup"):
        event = started_event(run, intent)
        assert isinstance(event, RunStarted)
        again = _as_validated(event)
        assert event.model_dump() == again.model_dump() and event.model_fields_set == again.model_fields_set
        assert event.to_json() == again.to_json()
        assert event.tools == run.offered and event.tools is not run.offered
    with pytest.raises(ConfigError, match="policy"):
        _run(policy="bogus")  # refused where the agent is made
    bad = _run()
    bad.config = dataclasses.replace(bad.config)  # a config that skipped the agent's check still meets validation
    object.__setattr__(bad.config, "policy", "bogus")
    with pytest.raises(ValidationError):
        started_event(bad, None)
    odd: Agent[Any, Any] = Agent(FunctionModel(lambda request: "done", name="m"), [])
    odd.model.name = 7  # type: ignore[misc]
    with pytest.raises(ValidationError):
        started_event(Run(odd, "hello", "r2"), None)


def test_run_finished_in_order_is_the_validated_event() -> None:
    run = _run()
    for status, reason, output, fired in [
        ("completed", "final_answer", "done", []),
        ("degraded", "cycle", {"a": [1]}, ["cycle", "no_progress"]),
        ("failed", "model_error", None, []),
    ]:
        run.fired = list(fired)
        event = finished(run, status, reason, output, rescued=status == "degraded")  # type: ignore[arg-type]
        assert isinstance(event, RunFinished)
        again = _as_validated(event)
        assert event.model_dump() == again.model_dump() and event.model_fields_set == again.model_fields_set
        assert event.to_json() == again.to_json()
    run.fired = [5]  # type: ignore[list-item]  # a detector's name of the wrong type is still refused
    with pytest.raises(ValidationError):
        finished(run, "degraded", "x", None)


def test_fresh_totals_are_the_validated_defaults() -> None:
    made, validated = trusted(Totals, {}), Totals()
    assert made.model_dump() == validated.model_dump() and made.model_fields_set == validated.model_fields_set == set()
    made.__dict__["model_calls"] += 1  # as the loop counts (Run.counts): no dict shared with other totals
    assert made.model_calls == 1 and Totals().model_calls == 0


def _old_sentences(text: str, min_words: int = 3) -> list[str]:
    found = []
    for raw in repetition._SENTENCE_END.split(text):
        sentence = " ".join(raw.lower().split())
        if len(sentence.split()) >= min_words:
            found.append(sentence)
    return found


def _old_glued(text: str, tail: int = repetition.TAIL) -> str | None:
    end = text[-tail:]
    for match in repetition._GLUED.finditer(end):
        unit, span = match.group(1), len(match.group(0))
        if span >= 40 and len({c for c in unit if c.isalnum()}) >= 2:
            return f"{span // len(unit)}x back to back: {unit}"
    run = repetition._LETTER_RUN.search(end)
    return f"{len(run.group(0))}x back to back: {run.group(1)}" if run else None


def _old_signs(detector: Any, spoken: Counter[str], body: str, text_only: bool, cleared: bool) -> list[str]:
    """RepetitionDetector._signs before its short-text shortcuts (a Counter of what was spoken)."""
    evidence = []
    counts = Counter(_old_sentences(body))
    for sentence, n in counts.most_common(3):
        if n >= detector.sentence_repeats:
            evidence.append(f"{n}x in one reply: {sentence[:200]}")
    group, run = repetition.longest_token_run(body)
    if run >= detector.token_repeats:
        evidence.append(f"{run}x back to back: {group[:80]}")
    elif (glued := _old_glued(body)) is not None:
        evidence.append(glued)
    if text_only:
        if cleared:
            spoken.clear()
        for sentence in counts:
            spoken[sentence] += 1
            if spoken[sentence] >= detector.across_replies and counts[sentence] < detector.sentence_repeats:
                evidence.append(f"in {spoken[sentence]} replies: {sentence[:200]}")
    return evidence


_TEXTS = [
    "",
    "done",
    "Done.",
    "a b",
    "a b c",
    "a,a,a,a,a,a,a,a,a,a",
    "a a a a a a a a a",
    "go go go go go go go go go go",
    "x" * 39,
    "x" * 40,
    "ab" * 19 + "a",
    "ab" * 20,
    "12345" * 8,
    "The file is empty. The file is empty. The file is empty. The file is empty.",
    "The file is empty. It has no rows.",
    "It has no rows.\nIt has no rows.",
    "İstanbul İstanbul ist",
    "one two\nthree",
    "SELECT SELECT SELECT SELECT SELECT SELECT SELECT SELECT SELECT SELECT",
    "I will read it now. " * 3,
]


@pytest.mark.parametrize("thresholds", [{}, {"token_repeats": 0, "sentence_repeats": 1}, {"token_repeats": 2}])
def test_repetition_signs_with_short_text_shortcuts_are_the_full_search(thresholds: dict[str, int]) -> None:
    assert all(repetition.sentences(t) == _old_sentences(t) for t in _TEXTS)
    assert all(repetition.glued_repeat(t) == _old_glued(t) for t in _TEXTS)
    assert all(repetition.glued_repeat(t, 10) == _old_glued(t, 10) for t in _TEXTS)
    detector, spoken = repetition.RepetitionDetector(**thresholds), Counter[str]()
    for i, text in enumerate(_TEXTS * 3):
        text_only, cleared = i % 4 != 1, i % 7 == 3
        detector._tool_call_since_last_text = cleared
        body = repetition.prose(text)
        assert detector._signs(body, text_only=text_only) == _old_signs(detector, spoken, body, text_only, cleared)
        assert detector._spoken == dict(spoken)


def test_a_new_run_id_is_the_uuid4_hex_of_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import random
    import uuid

    from loopwarden import agent

    draw = random.Random(7)
    for raw in [bytes(16), b"\xff" * 16, *(draw.randbytes(16) for _ in range(500))]:
        monkeypatch.setattr(agent.os, "urandom", lambda n, raw=raw: raw)
        made = agent.new_run_id()
        assert made == uuid.UUID(bytes=raw, version=4).hex
    monkeypatch.setattr(agent.os, "urandom", os.urandom)
    assert uuid.UUID(hex=agent.new_run_id()).version == 4


async def test_an_answer_with_no_verifier_ends_the_run_as_a_verified_one_does() -> None:
    from loopwarden import call

    def script(request: Any) -> Any:
        return call("look", {"q": "x"}) if len(request.messages) < 3 else "the answer"

    def look(q: str) -> str:
        return q

    def passes(text: str) -> str | None:
        return None

    runs = []
    for verifiers in ([], [passes]):
        agent: Agent[Any, Any] = Agent(FunctionModel(script, name="m"), [look], verifiers=verifiers)
        runs.append(await agent.run("go", run_id="r"))
    plain, verified = runs

    def without_ids(item: Any) -> Any:  # call ids are numbered across the process
        if isinstance(item, dict):
            return {k: without_ids(v) for k, v in item.items() if k not in ("id", "tool_call_id", "call_id")}
        return [without_ids(v) for v in item] if isinstance(item, list) else item

    assert without_ids(plain.messages) == without_ids(verified.messages)
    assert plain.output == verified.output == "the answer" and len(plain.events) == len(verified.events) > 4
    drop = {"ts": True, "duration_ms": True, "totals": {"duration_s"}, "tool_call_id": True, "call_id": True}
    assert [e.model_dump(exclude=drop) for e in plain.events] == [e.model_dump(exclude=drop) for e in verified.events]


def test_requests_and_replies_built_in_order_share_a_fields_set_until_one_is_assigned() -> None:
    from loopwarden.hotpath.trusted import in_order
    from loopwarden.models.base import ModelReply, ModelRequest, Usage
    from loopwarden.models.scripted import as_reply

    def request() -> ModelRequest:
        values = {"messages": [], "tools": [], "tool_choice": None, "max_tokens": None, "on_text": None}
        return in_order(ModelRequest, values)

    a, b = request(), request()
    assert a.model_fields_set is b.model_fields_set  # one set for the shape: no copy per step
    validated = ModelRequest(messages=[], tools=[], tool_choice=None, max_tokens=None, on_text=None)
    assert a.model_fields_set == validated.model_fields_set
    a.max_tokens = 5
    assert a.max_tokens == 5 and b.max_tokens is None and b.model_fields_set == request().model_fields_set
    c, d = as_reply("done", Usage()), as_reply("done", Usage())
    validated_reply = ModelReply(text="done", usage=Usage(), finish_reason="stop")
    assert c.model_fields_set is d.model_fields_set and c.model_fields_set == validated_reply.model_fields_set
    c.model = "m"
    assert c.model_fields_set == {"text", "usage", "finish_reason", "model"} and "model" not in d.model_fields_set
    copied = d.model_copy(update={"reasoning": "r"})
    assert "reasoning" in copied.model_fields_set and "reasoning" not in d.model_fields_set
