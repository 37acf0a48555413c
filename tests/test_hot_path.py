"""The loop's shortcuts give what the general path gives: each is checked against it."""

from __future__ import annotations

import itertools
import json
from types import CoroutineType
from typing import Annotated, Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import BaseModel, PlainSerializer, ValidationError

from loopwarden.context import RunContext
from loopwarden.events import EventStamper, GuardVerdict, ModelCalled, ToolCallFinished, Totals
from loopwarden.guard.cycles import CycleDetector, tail_cycle
from loopwarden.guard.ladder import Finding
from loopwarden.guard.novelty import content_hash, content_key, novelty_of
from loopwarden.models.base import Usage
from loopwarden.proposals import normalised
from loopwarden.state import CallRecord, RunState
from loopwarden.tools import ToolResult, tool


def _results() -> list[ToolResult]:
    return [
        ToolResult.success("no such file: part-1.txt"),
        ToolResult.success("no such file: part-2.txt"),  # the number is content, not a volatile part
        ToolResult.success("done at 2026-12-01T10:00:00Z"),
        ToolResult.success("done at 2026-12-02T11:30:00Z"),  # the same once the date is blanked
        ToolResult.success(1),
        ToolResult.success(1.0),
        ToolResult.success(True),
        ToolResult.success("1"),
        ToolResult.success(None),
        ToolResult.success({"rows": 3, "took_ms": 12}),
        ToolResult.success({"rows": 3, "took_ms": 99}),
        ToolResult.success(["a", "b"]),
        ToolResult.success("x" * 500),
        ToolResult.success("x" * 499 + "y"),
        ToolResult.failure("timeout", "read did not finish within 5 s", retryable=True),
        ToolResult.failure("timeout", "read did not finish within 9 s", retryable=True),
        ToolResult.failure("not_found", "read did not finish within 5 s"),
        ToolResult.success("same", message="a note"),
        ToolResult.success("same"),
    ]


def test_content_keys_are_equal_exactly_when_content_hashes_are() -> None:
    results = _results()
    for a, b in itertools.product(results, results):
        assert (content_key(a) == content_key(b)) == (content_hash(a) == content_hash(b)), (a, b)
    assert content_key(results[2]) == content_key(results[3])  # volatile parts blanked, as the hash does
    assert len(content_key(results[12])) == 64  # a long content is kept as its hash


def test_a_plain_result_writes_the_content_the_general_path_writes() -> None:
    extra = [ToolResult.success(float("nan")), ToolResult.success(-0.0), ToolResult.success('é ☃ \ud800 \x00 "q"')]
    for result in [
        *_results(),
        *extra,
        ToolResult.success({"a": [1, None]}),
        ToolResult(ok=True, data="x", retryable=True),
    ]:
        payload = result.model_dump(exclude_none=True)
        if result.ok:
            payload.pop("retryable", None)
        assert result.to_model_content() == json.dumps(payload, ensure_ascii=False, default=str)


class Plain(BaseModel):
    path: str
    offset: int = 0
    force: bool = False


class Floating(BaseModel):
    ratio: float


class Written(BaseModel):
    when: Annotated[int, PlainSerializer(lambda v: f"t+{v}")]


@pytest.mark.parametrize(
    "validated",
    [Plain(path="a"), Plain(path="b", offset="3", force="yes"), Floating(ratio=float("inf")), Written(when=3)],  # type: ignore[arg-type]
)
def test_normalised_arguments_are_what_model_dump_gives(validated: BaseModel) -> None:
    assert normalised(validated) == validated.model_dump(mode="json")


def test_a_tool_is_called_with_its_validated_fields_and_the_model_is_untouched() -> None:
    seen: list[dict[str, Any]] = []

    @tool
    def read(path: str, offset: int = 0) -> str:
        """Read."""
        seen.append({"path": path, "offset": offset})
        return path

    arguments = read.args_model.model_validate({"path": "a", "offset": "2"})
    assert read.call_inline(arguments) == "a" and seen == [{"path": "a", "offset": 2}]
    assert arguments.model_dump() == {"path": "a", "offset": 2}


def test_a_trusted_event_checks_each_call_sites_field_names_once_per_shape() -> None:
    stamp = EventStamper("run")
    fields = {"turn": 1, "detector": "guard", "action": "allowed", "reason": "allowed"}
    first = stamp.trusted(GuardVerdict, **fields)
    again = stamp.trusted(GuardVerdict, **fields)  # the shape is known now: built unchecked
    assert first.model_dump(exclude={"seq", "ts"}) == again.model_dump(exclude={"seq", "ts"})
    assert first.model_fields_set == again.model_fields_set and first.model_fields_set is not again.model_fields_set
    assert first.evidence is not again.evidence  # a default factory's value is each event's own
    with pytest.raises(ValidationError, match="reasn"):
        stamp.trusted(GuardVerdict, turn=1, detector="guard", action="allowed", reasn="typo")
    with pytest.raises(ValidationError, match="reason"):
        stamp.trusted(GuardVerdict, turn=1, detector="guard", action="allowed")
    built = stamp.trusted(ModelCalled, turn=1, model="m", tools_offered=[], n_tools_offered=0, usage=Usage(), notes=[])
    assert list(built.model_dump()) == list(ModelCalled.model_fields)  # field order kept


def test_totals_count_in_place_as_setting_them_does() -> None:
    counted, set_ = Totals(), Totals()
    counts = counted.__dict__  # as the loop counts (Run.counts)
    counts["tool_rounds"] += 1
    counts["cost"] += 0.25
    counted.add_usage(Usage(prompt_tokens=3, completion_tokens=2, cached_tokens=1))
    set_.tool_rounds, set_.cost = 1, 0.25
    set_.prompt_tokens, set_.completion_tokens, set_.cached_tokens = 3, 2, 1
    assert counted == set_ and counted.model_dump_json() == set_.model_dump_json()


def test_a_quick_tool_that_raises_a_timeout_reads_as_a_timed_out_call_with_or_without_a_limit() -> None:
    import asyncio

    from loopwarden.executor import Executor

    @tool(blocking=False)  # runs inline: no timer of the executor's own
    def lookup() -> str:
        """Times out on its own."""
        raise TimeoutError("socket")

    for limit, message in ((5.0, "lookup did not finish within 5 s"), (None, "lookup did not finish")):
        execution = asyncio.run(Executor(default_timeout=limit, retry=_no_retry()).run(lookup, lookup.args_model()))
        result = execution.result
        assert (result.error_type, result.retryable) == ("timeout", True)
        assert result.message is not None and result.message.startswith(message)


def _no_retry() -> Any:
    from loopwarden.retry import RetryPolicy

    return RetryPolicy(max_attempts=1)


def test_a_turns_calls_are_checked_against_the_offer_the_general_path_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop checks a reply's calls against the tools it was offered (`last_offered`), not
    the offer worked out again: the two agree whenever the offer changes (narrowed after a
    repeat, tools found by search, a paused turn resumed), so the checks see one offer."""
    import asyncio

    import test_approval
    import test_loop
    import test_toolsearch
    from loopwarden.loop import Run

    checked: list[tuple[list[str], list[str]]] = []
    general = Run._check

    def comparing(self: Run, reply: Any) -> Any:
        checked.append((sorted(self.last_offered), sorted(self._offered_now())))
        return general(self, reply)

    monkeypatch.setattr(Run, "_check", comparing)
    test_loop.test_narrowing_drops_the_repeated_tool_and_the_nudge_is_sent_once()
    test_loop.test_narrowing_forces_the_terminal_tool_when_the_phase_has_one()
    asyncio.run(test_toolsearch.test_agent_offers_a_handful_finds_the_tool_and_uses_it_next_turn())
    asyncio.run(test_toolsearch.test_a_found_tool_called_in_the_same_turn_is_not_allowed())
    test_approval.test_without_a_gate_the_run_pauses_and_resumes_from_json_after_a_restart()
    offers = {tuple(used) for used, _ in checked}
    assert len(checked) >= 12 and len(offers) >= 4  # the offer did change along the way
    assert all(used == general_offer for used, general_offer in checked)


def _as_validated(event: Any) -> Any:
    """The event validation makes from the fields the built one says were given."""
    return type(event).model_validate({name: getattr(event, name) for name in event.model_fields_set})


def test_events_built_in_order_are_what_validating_their_given_fields_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's per-step events (`EventStamper.in_order`: every field in order, no defaults
    merged) in a run that allows, refuses and answers calls from the cache: the same fields in
    the same order, the same fields-set, as validation of the fields it says were given; and
    none of them took the general way."""
    import loopwarden.hotpath.trusted as trusted_module
    from loopwarden import Agent, FunctionModel
    from loopwarden.events import ToolCallFinished, ToolCallProposed
    from loopwarden.models.scripted import call

    general: list[type] = []
    trusted = trusted_module.trusted
    monkeypatch.setattr(trusted_module, "trusted", lambda cls, values: general.append(cls) or trusted(cls, values))

    @tool
    def read(path: str) -> str:
        """Read."""
        return f"text of {path}"

    script = iter([call("read", {"path": "a"}), call("nope"), call("read", "{not json"), call("read", {"path": "a"})])
    run = Agent(FunctionModel(lambda r: next(script, "done")), [read]).run_sync("x")
    hot = (ModelCalled, ToolCallProposed, GuardVerdict, ToolCallFinished)
    kinds: dict[type, set[str]] = {}
    for event in run.events:
        if type(event) in hot:
            again = _as_validated(event)
            assert list(again.__dict__.items()) == list(event.__dict__.items()), event
            assert again.model_fields_set == event.model_fields_set and "type" not in event.model_fields_set
            kinds.setdefault(type(event), set()).add(getattr(event, "action", ""))
    assert set(kinds) == set(hot) and {"allowed", "refused", "cached"} <= kinds[GuardVerdict]
    assert not general
    stamp = EventStamper("r")  # the way taken otherwise, for a dict not in field order
    stamp.in_order(GuardVerdict, {"detector": "d", "turn": 1, "action": "allowed", "reason": "r"})
    assert general == [GuardVerdict]


def test_in_order_takes_the_general_way_for_any_other_dict() -> None:
    from loopwarden.events import ToolCallFinished
    from loopwarden.hotpath.trusted import in_order

    stamp = EventStamper("run")
    fields = {"turn": 1, "call_id": "c", "tool": "t", "ok": True, "error_type": None, "retryable": False,
              "message": None, "cached": False, "executed": True, "attempts": 1, "duration_ms": 0.0,
              "preview": "", "checklist_done": []}  # fmt: skip
    fast = stamp.in_order(ToolCallFinished, dict(fields))
    swapped = stamp.in_order(ToolCallFinished, {"call_id": "c", "turn": 1, **fields})  # not in field order
    assert list(swapped.__dict__) == list(fast.__dict__) == list(ToolCallFinished.model_fields)
    assert swapped.model_dump(exclude={"seq", "ts"}) == fast.model_dump(exclude={"seq", "ts"})
    assert fast.model_fields_set == swapped.model_fields_set == set(ToolCallFinished.model_fields) - {"type"}
    short = dict(fields)
    del short["preview"]  # a default left out: filled in, and not in the fields-set
    built = stamp.in_order(ToolCallFinished, short)
    assert built.preview == "" and "preview" not in built.model_fields_set
    with pytest.raises(ValidationError, match="cahced"):
        stamp.in_order(ToolCallFinished, {**fields, "cahced": True})
    with pytest.raises(ValidationError, match="ok"):
        stamp.in_order(ToolCallFinished, {k: v for k, v in fields.items() if k != "ok"})
    # a name said to be at its default that is not: the general way, which counts it as given
    data = {"type": "x", "run_id": "r", "seq": 1, "ts": 0.0, "turn": 1, "detector": "d", "action": "allowed",
            "reason": "r", "call_id": None, "tool": None, "count": None, "evidence": ["e"]}  # fmt: skip
    odd = in_order(GuardVerdict, data, ("evidence",))
    assert odd.evidence == ["e"] and "evidence" in odd.model_fields_set


PLAIN_VOLATILE_TEXT = (
    r"(?=[0-9a-fA-F])(?:"
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"
    r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b[0-9a-fA-F]{16,}\b"
    r"|\b\d{10,}\b"
    r"|\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b)"
)
"""The volatile-text pattern as first written: one plain alternative per kind of part."""


def test_volatile_text_is_blanked_where_the_plain_alternation_blanks_it() -> None:
    import random
    import re

    from loopwarden.guard.novelty import _VOLATILE_TEXT

    plain = re.compile(PLAIN_VOLATILE_TEXT)
    parts = ["2026-12-01", "T10:00:00Z", " 10:00", ":00", ".5", "+01:00", "123e4567-e89b-12d3-a456-426614174000",
             "deadbeef", "deadbeefdeadbeef", "1733130000", "123", "9", " ms", "ms", "s", " sec", "seconds", "x", "_",
             "-", " ", "a", "é", "٣", "Z", "T", ".", ":", "0", "f"]  # fmt: skip
    characters = "0123456789abcdefABCDEFxyzT Z:-+._\n\t msecondsé٣"
    rng = random.Random(17)
    texts = ["no such file: part-12.txt", "took 12 ms", "at 10:00:01.5 now", "x9:00:00", "3.5s and 4 seconds"]
    for _ in range(20000):
        texts.append("".join(rng.choice(parts) for _ in range(rng.randint(0, 8))))
        texts.append("".join(rng.choice(characters) for _ in range(rng.randint(0, 30))))
    blanked = 0
    for text in texts:
        expected = plain.sub("<v>", text)
        assert _VOLATILE_TEXT.sub("<v>", text) == expected, text
        blanked += expected != text
    assert blanked > len(texts) // 10  # the texts did have volatile parts to blank


def test_volatile_text_read_in_c_first_strips_as_the_sub_does() -> None:
    """_strip_text's shortcut (no candidate for any alternative: the text as it is, or only
    respaced) against the sub and split it stands for, on random texts."""
    import random

    from loopwarden.guard.novelty import _VOLATILE_TEXT, _strip_text

    parts = ["2026-12-01", "10:00:00", "1:00", "12.5", "123e4567-e89b-12d3-a456-426614174000", "deadbeef",
             "deadbee", "beefdeadbeefdead1", "1733130000", "12345", "123", "9", " ms", "ms", "s", " sec", "m", "x",
             "-", " ", "  ", "\t", "\n", "\x1c", "\x0b", "a", "part-17.txt", "é", "٣", "\u2003", ":", "0"]  # fmt: skip
    characters = "0123456789abcdefABCDEFxyzmsT :-._\n\t\x1f\x85é٣"
    rng = random.Random(29)
    texts = ["no such file: part-17.txt", "", " ", "took 12 ms", "ok", "a  b", " a", "a ", "a\tb", "3 m", "3\x1cs"]
    for _ in range(20000):
        texts.append("".join(rng.choice(parts) for _ in range(rng.randint(0, 8))))
        texts.append("".join(rng.choice(characters) for _ in range(rng.randint(0, 30))))
    unchanged = respaced = blanked = 0
    for text in texts:
        expected = " ".join(_VOLATILE_TEXT.sub("<v>", text).split())
        assert _strip_text(text) == expected, repr(text)
        unchanged += expected == text
        respaced += expected != text and "<v>" not in expected
        blanked += "<v>" in expected
    assert min(unchanged, respaced, blanked) > len(texts) // 20  # every way was taken


def test_replies_calls_and_results_built_in_order_are_what_validation_makes() -> None:
    from loopwarden.models.base import ModelReply, ToolCall
    from loopwarden.models.scripted import as_reply

    @tool
    def read(path: str) -> str:
        """Read."""
        return path

    usage = Usage(prompt_tokens=3)
    built = [as_reply("an answer", usage), as_reply(ToolCall(id="c", name="read", arguments='{"path": "a"}'), usage)]
    built += [read.to_result("text"), read.to_result({"rows": [1]}), built[1].tool_calls[0]]
    assert [type(b) for b in built] == [ModelReply, ModelReply, ToolResult, ToolResult, ToolCall]
    for b in built:
        again = _as_validated(b)
        assert list(again.__dict__.items()) == list(b.__dict__.items()) and again.model_fields_set == b.model_fields_set
    assert built[0].notes is not built[1].notes  # a default factory's value is each instance's own


def test_a_proposals_record_names_each_field_as_the_keyword_built_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Proposal.record` builds its `CallRecord` by position; every record the loop hands the
    detectors in the loop tests equals the one built by keyword from the same proposal."""
    import copy

    import test_loop
    from loopwarden.proposals import Proposal
    from loopwarden.state import CallRecord

    seen: list[tuple[Any, Any]] = []
    by_position = Proposal.record

    def by_keyword(p: Proposal) -> CallRecord:
        return CallRecord(
            turn=p.turn,
            call_id=p.call.id,
            tool=p.tool.qualified_name if p.tool else p.call.name,
            arguments=p.arguments,
            fingerprint=p.fingerprint,
            result=p.result,
            executed=p.attempts > 0,
            cached=p.cached,
            exempt=bool(p.tool and (p.tool.repeatable or p.tool.terminal)),
            writes=bool(p.tool and p.tool.side_effect == "write"),
        )

    def comparing(p: Proposal) -> CallRecord:
        record = by_position.fget(p)  # type: ignore[attr-defined]
        seen.append((copy.copy(record), by_keyword(p)))  # as it is now: it may be filled in later
        return record  # type: ignore[no-any-return]

    filled_in = Proposal.result_record

    def result_comparing(p: Proposal) -> CallRecord:  # the record shown to on_calls, filled in
        record = filled_in(p)
        seen.append((record, by_keyword(p)))
        return record

    monkeypatch.setattr(Proposal, "record", property(comparing))
    monkeypatch.setattr(Proposal, "result_record", result_comparing)
    for name in dir(test_loop):
        if name.startswith("test_") and not _needs_args(getattr(test_loop, name)):
            getattr(test_loop, name)()
    kinds = {(r.executed, r.cached, r.exempt, r.writes, r.result is None) for r, _ in seen}
    assert len(seen) > 50 and len(kinds) >= 4  # records of many kinds were compared
    assert all(built == expected for built, expected in seen)


def _needs_args(fn: Any) -> bool:
    import asyncio
    import inspect

    return bool(inspect.signature(fn).parameters) or asyncio.iscoroutinefunction(fn)


def test_arguments_are_validated_as_model_validate_validates_them() -> None:
    """validate_arguments calls the argument model's validator directly unless the model has a
    `model_validate` of its own: the same instances, the same errors, the override still called."""
    from loopwarden.executor import validate_arguments

    def read(path: str, offset: int = 0, force: bool = False) -> str:
        return path

    declared = tool(read)
    cases: list[Any] = [{"path": "a"}, {"path": "b", "offset": "3", "force": "yes"}, {}, {"path": 1}, {"offset": "x"}]
    for arguments in cases:
        got = validate_arguments(declared, arguments)
        try:
            expected: Any = declared.args_model.model_validate(arguments)
        except ValidationError as error:
            assert isinstance(got, ToolResult) and not got.ok and got.error_type == "invalid_arguments"
            assert [e["field"] for e in got.data["errors"]] == [".".join(map(str, e["loc"])) for e in error.errors()]
            continue
        assert type(got) is type(expected) and got == expected
        assert got.model_fields_set == expected.model_fields_set

    asked: list[Any] = []

    class Own(BaseModel):
        path: str

        @classmethod
        def model_validate(cls, obj: Any, **kwargs: Any) -> Own:
            asked.append(obj)
            return super().model_validate({"path": str(obj["path"]).upper()}, **kwargs)

    from loopwarden.tools import Tool

    custom = Tool(name="own", description="own", fn=lambda path: path, args_model=Own)
    validated = validate_arguments(custom, {"path": "a"})
    assert asked == [{"path": "a"}] and isinstance(validated, Own) and validated.path == "A"


def test_frozen_models_built_in_order_share_a_fields_set_nothing_changes() -> None:
    """A frozen model's in-order instances (a tool's results, a reply's calls) share one fields-set:
    pydantic adds to a fields-set only on assignment, which a frozen model refuses, and copies it
    before a `model_copy` adds to it; so every instance still reads the fields-set validation gives."""
    import copy
    import pickle

    from loopwarden.models.base import ToolCall
    from loopwarden.models.scripted import as_reply

    @tool
    def read(path: str) -> str:
        """Read."""
        return path

    results = [read.to_result("a"), read.to_result("b")]
    calls = [as_reply(ToolCall(id=str(i), name="read", arguments="{}")).tool_calls[0] for i in range(2)]
    for a, b in (results, calls):
        shared = a.model_fields_set
        assert shared is b.model_fields_set and shared == _as_validated(a).model_fields_set
        before = set(shared)
        with pytest.raises(ValidationError):
            a.ok = False if isinstance(a, ToolResult) else None  # type: ignore[misc,union-attr]
        with pytest.raises(ValidationError):
            b.id = "x"  # type: ignore[misc,union-attr]
        changed = a.model_copy(update={"message": "m"} if isinstance(a, ToolResult) else {"id": "z"})
        assert changed.model_fields_set >= before and changed.model_fields_set is not shared
        for again in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
            assert again == a and again.model_fields_set == before
            again.model_fields_set.add("data")
        assert shared == before


def _keeper() -> Any:
    """A detector of an application's own that keeps every record `on_calls` shows it."""
    from loopwarden.guard import Detector

    class Keeper(Detector):
        name = "keeper"

        def __init__(self) -> None:
            self.kept: list[Any] = []

        def on_calls(self, turn: int, records: list[Any], state: Any) -> None:
            self.kept += records

    return Keeper()


def test_a_record_shown_to_on_calls_is_filled_in_only_when_no_detector_can_keep_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the built-in detectors a call has one record: the one `on_calls` saw, filled in with
    the result (equal to a record built afresh: the test above). A detector of the application's
    own, or a subclass of a built-in one, may keep what `on_calls` showed it: it keeps it as
    shown (no result, not executed), and the results go in records of their own."""
    from loopwarden import Agent, FunctionModel, ModelRequest
    from loopwarden.guard import DEFAULT_DETECTORS, CycleDetector
    from loopwarden.models.base import ToolCall

    @tool
    def read(path: str) -> str:
        """Read."""
        return f"text of {path}"

    def reads(request: ModelRequest) -> Any:
        done = sum(1 for m in request.messages if m["role"] == "tool")
        return "done" if done >= 3 else ToolCall(id="c", name="read", arguments=json.dumps({"path": f"{done}"}))

    shown: list[Any] = []
    cycle_on_calls = CycleDetector.on_calls

    def watched(self: CycleDetector, turn: int, records: list[Any], state: Any) -> Any:
        shown.extend(records)  # held by the test, to compare identities after the run
        return cycle_on_calls(self, turn, records, state)

    class Keeping(CycleDetector):
        def on_calls(self, turn: int, records: list[Any], state: Any) -> Any:
            shown.extend(records)
            return super().on_calls(turn, records, state)

    with monkeypatch.context() as patched:
        patched.setattr(CycleDetector, "on_calls", watched)  # still the built-in class
        plain = Agent(FunctionModel(reads), [read]).run_sync("read")
    assert [r.result.data for r in plain.state.records] == ["text of 0", "text of 1", "text of 2"]  # type: ignore[union-attr]
    assert len(shown) == 3 and all(a is b for a, b in zip(shown, plain.state.records, strict=True))
    keeper = _keeper()
    for detectors, kept in (([*DEFAULT_DETECTORS.values(), lambda: keeper], keeper.kept), ([Keeping], shown)):
        shown.clear()
        run = Agent(FunctionModel(reads), [read], detectors=detectors).run_sync("read")  # type: ignore[arg-type]
        assert len(kept) == 3 and all(r.result is None and not r.executed for r in kept)
        assert not any(r is s for r in kept for s in run.state.records)
        assert [r.result for r in run.state.records] == [r.result for r in plain.state.records]
        assert [r.executed for r in run.state.records] == [True] * 3


def _flaky() -> Any:
    """A quick tool that fails once with a connection error (retryable), then answers."""
    failures = iter([ConnectionError("reset"), None])

    @tool(blocking=False)
    def flaky(path: str) -> str:
        """Fails once, then answers."""
        error = next(failures)
        if error is not None:
            raise error
        return path

    return flaky


def test_one_inline_call_started_here_is_what_run_many_gives() -> None:
    """`Executor.start` makes a turn's one inline call without coroutines; its execution is the
    one `run_many` makes (results, attempts) for a plain result, a raised error, a retried
    failure and a write's failure not retried; an executor whose `run_many` is replaced (durable
    runs) goes through it."""
    import asyncio

    from loopwarden.executor import Executor
    from loopwarden.retry import RetryPolicy

    def tools() -> list[Any]:
        @tool(blocking=False)
        def ok(path: str) -> str:
            """Ok."""
            return path

        @tool(blocking=False)
        def broken(path: str) -> str:
            """Raises."""
            raise ValueError(path)

        flaky = _flaky()

        @tool(blocking=False, side_effect="write")
        def write(path: str) -> str:
            """A write that fails retryably."""
            raise ConnectionError(path)

        return [ok, broken, flaky, write]

    async def nap(seconds: float) -> None:
        return None

    def executor() -> Executor:
        return Executor(retry=RetryPolicy(max_attempts=3, base_delay=0.0), sleep=nap)

    async def both() -> None:
        for here, there, kept in zip(tools(), tools(), tools(), strict=True):
            started = executor().start([(here, here.args_model(path="p"))])
            done = started if isinstance(started, list) else await started
            general = await executor().run_many([(there, there.args_model(path="p"))])
            assert [(e.result, e.attempts) for e in done] == [(e.result, e.attempts) for e in general]
            # the loop's common turn: the first result kept by the caller, or the retries' coroutine
            attempted = executor().attempt_inline(kept, kept.args_model(path="p"), 0.0)
            if type(attempted) is CoroutineType:
                execution = await attempted
                assert (execution.result, execution.attempts) == (general[0].result, general[0].attempts)
            else:
                assert isinstance(attempted, ToolResult) and (attempted, 1) == (general[0].result, general[0].attempts)
        wrapped, calls = executor(), []

        async def run_many(jobs: Any) -> Any:
            calls.append(jobs)
            return []

        wrapped.run_many = run_many  # type: ignore[method-assign]
        ok = tools()[0]
        started = wrapped.start([(ok, ok.args_model(path="p"))])
        assert not isinstance(started, list) and await started == [] and len(calls) == 1

    asyncio.run(both())


def test_a_quick_call_reads_the_threads_waits_once_and_is_paced_as_with_two_readings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call within `INLINE_LIMIT_S` is quick whether it waited or not (`ToolPace.note`), so the
    thread's waits are read after a call only when it was slow: the pace is the same."""
    import loopwarden.tools as tools_module

    for limit, readings_made, blocks in ((60.0, 1, False), (0.0, 2, True)):
        readings = itertools.count()  # every reading says the thread waited since the last one
        monkeypatch.setattr(tools_module, "_waits_so_far", lambda: next(readings))  # noqa: B023
        monkeypatch.setattr(tools_module, "INLINE_LIMIT_S", limit)

        @tool(name=f"quick_{readings_made}")
        def quick() -> str:
            """Quick."""
            return "ok"

        object.__setattr__(quick, "pace", tools_module.ToolPace())  # its own, whatever ran before
        assert quick.call_inline(quick.args_model()) == "ok"
        assert next(readings) == readings_made
        assert (quick.pace.calls, quick.pace.blocks) == (1, blocks)


def test_events_built_in_order_share_a_fields_set_until_one_is_assigned_to() -> None:
    """Events of one shape built in order share one fields-set (a set each cost its copy and a
    collector's walk over it every step); pydantic adds to a fields-set in place only on
    assignment, and an event then takes its own copy first: what every event says was set is
    what it would say with a set of its own."""
    import copy
    import pickle

    from loopwarden.events import ToolCallFinished

    stamp = EventStamper("r")

    def finished(turn: int) -> Any:
        kind, run_id, seq, ts = stamp.head(ToolCallFinished)
        fields = {"type": kind, "run_id": run_id, "seq": seq, "ts": ts, "turn": turn, "call_id": "c", "tool": "t",
                  "ok": True, "error_type": None, "retryable": False, "message": None, "cached": False,
                  "executed": True, "attempts": 1, "duration_ms": 0.5, "preview": "p",
                  "checklist_done": []}  # fmt: skip
        return stamp.built(ToolCallFinished, fields)

    a, b, c = finished(1), finished(2), finished(3)
    shared = a.model_fields_set
    assert shared is b.model_fields_set is c.model_fields_set and shared == _as_validated(a).model_fields_set
    before, dumped = set(shared), b.model_dump(exclude_unset=True)
    b.type = "tool_call_finished"  # set by name: now counted as given, on b alone
    assert b.model_fields_set == before | {"type"} and b.model_fields_set is not shared
    assert shared == before and c.model_dump(exclude_unset=True) == {**dumped, "turn": 3, "seq": c.seq, "ts": c.ts}
    changed = a.model_copy(update={"type": "tool_call_finished"})
    assert changed.model_fields_set == before | {"type"} and shared == before
    for again in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert again == a and again.model_fields_set == before
        again.turn = 9
        assert shared == before


def test_the_loop_counts_into_the_totals_own_values() -> None:
    """`Run.counts` is the totals' own dict: what the loop counts there is what `run_finished`
    and the result report, as the model_called events and the calls made add up."""
    import asyncio

    from loopwarden import Agent, FunctionModel
    from loopwarden.events import ModelCalled, RunFinished
    from loopwarden.models.base import ModelReply, ModelRequest, ToolCall

    @tool(blocking=False)
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    def reply(request: ModelRequest) -> ModelReply | str:
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if turn >= 3:
            return "done"
        calls = [ToolCall(id=f"c{turn}{i}", name="read", arguments=f'{{"path": "{turn}{i}"}}') for i in range(turn + 1)]
        usage = Usage(prompt_tokens=7 + turn, completion_tokens=2, cached_tokens=turn)
        return ModelReply(tool_calls=calls, usage=usage)

    result = asyncio.run(Agent(FunctionModel(reply), [read]).run("go"))
    called = [e for e in result.events if isinstance(e, ModelCalled)]
    finished = result.events[-1]
    assert isinstance(finished, RunFinished) and finished.totals == result.totals
    t = result.totals
    assert (t.model_calls, t.tool_rounds, t.tool_calls_proposed, t.tool_executions) == (4, 3, 6, 6)
    assert t.prompt_tokens == sum(e.usage.prompt_tokens for e in called) == 7 + 8 + 9 + 10  # the answer's: 10, 5
    assert t.completion_tokens == sum(e.usage.completion_tokens for e in called)
    assert t.cached_tokens == sum(e.usage.cached_tokens for e in called) == 0 + 1 + 2 + 0


def test_a_function_model_turns_every_kind_of_reply_as_before() -> None:
    """`FunctionModel.complete` checks a reply's exact type first and `as_reply` asks for a
    `ToolCall` first: each kind (and subclasses, awaitables, exceptions) still comes back as it did."""
    import asyncio

    from loopwarden import FunctionModel
    from loopwarden.models.base import ModelReply, ModelRequest, ToolCall

    class MyCall(ToolCall):
        pass

    class MyText(str):
        pass

    given = ModelReply(text="as is", usage=Usage(prompt_tokens=1))

    async def later() -> str:
        return "awaited"

    items: list[Any] = [
        "text",
        MyText("sub"),
        ToolCall(id="x", name="read", arguments='{"a": 1}'),
        MyCall(id="y", name="read"),
        given,
        [ToolCall(id="a", name="read"), ToolCall(id="b", name="write")],
    ]
    request = ModelRequest(messages=[{"role": "user", "content": "go"}])
    for item in items:
        reply = asyncio.run(FunctionModel(lambda r, item=item: item).complete(request))
        if item is given:
            assert reply is given
        elif isinstance(item, str):
            assert (reply.text, reply.tool_calls, reply.finish_reason) == (item, [], "stop")
            assert reply.model_fields_set == {"text", "usage", "finish_reason"} and reply.usage.prompt_tokens == 10
        else:
            calls = item if isinstance(item, list) else [item]
            assert [(type(c), c.name, c.arguments) for c in reply.tool_calls] == [
                (type(c), c.name, c.arguments) for c in calls
            ]
            assert all(c.id.startswith("call_") for c in reply.tool_calls) and reply.finish_reason == "tool_calls"
            assert reply.text is None and reply.usage.completion_tokens == 5
    assert asyncio.run(FunctionModel(lambda r: later()).complete(request)).text == "awaited"
    with pytest.raises(ValueError, match="refused"):
        asyncio.run(FunctionModel(lambda r: ValueError("refused")).complete(request))
    with pytest.raises(TypeError, match="cannot turn int"):
        asyncio.run(FunctionModel(lambda r: 3).complete(request))  # type: ignore[arg-type,return-value]


def test_a_tools_raw_value_is_a_result_exactly_when_isinstance_says_so() -> None:
    """`Tool.to_result` skips the isinstance for plain values (never a ToolResult): a ToolResult
    or a subclass is passed on as it is, anything else wrapped as a success (or parsed)."""

    class Mine(ToolResult):
        pass

    @tool(blocking=False)
    def read(path: str) -> str:
        """Read."""
        return path

    mine = Mine(ok=False, error_type="x", message="m")
    for raw in [ToolResult.success(1), ToolResult.failure("e", "m"), mine]:
        assert read.to_result(raw) is raw
    for raw in ["s", {"a": 1}, ["l"], 1, 1.5, True, None, ("t",), b"b"]:
        result = read.to_result(raw)
        assert not isinstance(raw, ToolResult) and type(result) is ToolResult and result.ok and result.data == raw
    assert not read.to_result({"ok": False, "error": "denied"}).ok  # the default parser still reads a failure


_STRINGS = ["", "part-17.txt", 'é ☃ "q" \\ /', "\ud800", "\x00\x1f\x7f", "\u2028", "x" * 70, "took 12 ms", " a  b "]


def test_a_one_string_argument_is_written_as_the_encoder_writes_it() -> None:
    """canonical_json's shortcut for one string argument against the encoder it stands for."""
    from loopwarden.guard.fingerprint import _encode, canonical_json

    for key, value in itertools.product(_STRINGS, _STRINGS):
        assert canonical_json({key: value}) == _encode({key: value}), (key, value)
    assert canonical_json({"n": 1}) == _encode({"n": 1})  # other values take the general way
    assert canonical_json({"a": "x", "b": "y"}) == _encode({"a": "x", "b": "y"})


def test_a_string_result_is_keyed_as_the_general_path_keys_it() -> None:
    """content_key's shortcut for a string result with no message: the repr of its parts, as
    for any scalar result, or that text's hash when it is long."""
    import hashlib

    from loopwarden.guard.novelty import _strip_volatile

    for text in [*_STRINGS, "done at 2026-12-01T10:00:00Z", "id deadbeefdeadbeef1"]:
        for result in (ToolResult.success(text), ToolResult.failure("not_found", "gone", data=text)):
            parts = repr((result.ok, result.error_type, _strip_volatile(result.message), _strip_volatile(text)))
            short = parts if len(parts) <= 64 else hashlib.sha256(parts.encode("utf-8", "surrogatepass")).hexdigest()
            assert content_key(result) == short, text


def test_the_fused_turn_tells_what_the_general_turn_tells(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's common turn (one quick inline call: `Run._quick`) is the general turn's
    `_proposed`, `_execute`, `_finished` fused, with no `Execution` made for a final first result
    (`Executor.attempt_inline`): a run whose every turn takes the general way tells the same
    events, field for field, kept or streamed, for a plain call, one retried after a connection
    error, one that raises, one that takes the run context, and an answer from the cache."""
    import asyncio

    import test_kept_events
    from loopwarden import Agent, FunctionModel
    from loopwarden.loop import Run
    from loopwarden.models.scripted import call

    def agent() -> Agent[Any, Any]:
        @tool(blocking=False)
        def read(path: str) -> str:
            """Read."""
            return f"text of {path}"

        flaky = _flaky()

        @tool(blocking=False)
        def broken(path: str) -> str:
            """Raises."""
            raise ValueError(path)

        @tool(blocking=False)
        def where(ctx: RunContext[Any], path: str) -> str:
            """Says the turn."""
            return f"{path} in turn {ctx.turn}"

        replies = [call("read", {"path": "a"}), call("flaky", {"path": "b"}), call("broken", {"path": "c"}),
                   call("where", {"path": "d"}), call("read", {"path": "a"}), "done"]  # fmt: skip
        script = iter(replies)
        return Agent(FunctionModel(lambda r: next(script, "done")), [read, flaky, broken, where])

    async def streamed() -> list[Any]:
        return [event async for event in agent().stream("x", run_id="r")]

    told = []
    for general in (False, True):
        if general:
            monkeypatch.setattr(Run, "_quick", lambda self, p: False)
        test_kept_events._deterministic(monkeypatch)
        kept = agent().run_sync("x", run_id="r").events
        test_kept_events._deterministic(monkeypatch)
        told.append((kept, asyncio.run(streamed())))
    (fused_kept, fused_streamed), (general_kept, general_streamed) = told
    for events in (fused_streamed, general_kept, general_streamed):
        test_kept_events._same(fused_kept, events)
    finished = [e for e in fused_kept if isinstance(e, ToolCallFinished)]
    assert [(e.ok, e.attempts, e.cached) for e in finished] == [
        (True, 1, False),
        (True, 2, False),
        (False, 1, False),
        (True, 1, False),
        (True, 0, True),
    ]
    assert finished[3].preview == '{"ok": true, "data": "d in turn 4"}'


class _PlainCycles(CycleDetector):
    """`CycleDetector.on_calls` the general way: the window trimmed at every call, and
    `tail_cycle` (with its own first check, the slice searched) asked every time."""

    def on_calls(self, turn: int, records: list[CallRecord], state: RunState) -> Finding | None:
        news = novelty_of(state).total
        counted = False
        for record in records:
            if not record.exempt:
                self._sequence.append(record.fingerprint)
                self._news.append(news)
                self._tools[record.fingerprint] = record.tool
                self._position += 1
                counted = True
        if not counted:
            return None
        sequence, kept = self._sequence, self.window + self.max_period
        if len(sequence) > kept:
            del sequence[:-kept]
            del self._news[:-kept]
        cycle = tail_cycle(sequence, self.max_period, self.min_repeats)
        if cycle is None or news > self._news[-cycle.period]:
            self._current = None
            return None
        return self._escalate(cycle, turn, self._news[-cycle.span], news)


@given(
    st.lists(
        st.tuples(st.lists(st.tuples(st.sampled_from("ABCD"), st.booleans()), max_size=3), st.booleans()),
        max_size=120,
    ),
    st.sampled_from([(8, 2), (3, 2), (4, 3)]),
)
@example([([(c, False)], False) for c in "BAABAABAABAA"], (8, 2))  # the last call also the one before it
@example([([(c, False)], False) for c in "AB" * 60], (8, 2))  # a cycle longer than the window
def test_the_cycle_detector_finds_what_the_general_way_finds(
    turns: list[tuple[list[tuple[str, bool]], bool]], shape: tuple[int, int]
) -> None:
    """The cycle detector asks `tail_cycle` only when the last call recurs within a period, read
    from where each call was last made, and trims its window now and then: every finding (and
    None) is the one the general way makes, turn by turn, for any calls, exempt ones, turns of
    several calls and novelty moving."""
    max_period, min_repeats = shape
    quick, plain = (kind(max_period=max_period, min_repeats=min_repeats) for kind in (CycleDetector, _PlainCycles))
    states = (RunState(), RunState())
    for turn, (calls, new) in enumerate(turns, 1):
        records = [CallRecord(turn, "c", name, {}, f"{name}:{{}}", exempt=exempt) for name, exempt in calls]
        for state in states:
            novelty_of(state).text += new
        assert quick.on_calls(turn, records, states[0]) == plain.on_calls(turn, records, states[1])
