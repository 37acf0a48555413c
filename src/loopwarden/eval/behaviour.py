"""The scripted model of a case: a sequence of replies, a call repeated forever, a cycle, or a
recorded cassette — and, for partial collapse, a switch to another script once it is nudged.
How it reacts to the runtime is part of the case: it obeys a forced `tool_choice` or ignores it,
and it answers when asked or never does (replying with tool calls only)."""

from __future__ import annotations

import json
from pathlib import Path

from ..models.base import Model, ModelError, ModelReply, ModelRequest, ToolCall, Usage
from ..models.cassette import ReplayModel, load_cassette
from .case import ModelSpec, Step

RETRYABLE_ERRORS = frozenset({"rate_limited", "server_error", "timeout", "http_429", "http_500", "http_503"})


def step_reply(step: Step, index: int, usage: Usage) -> ModelReply:
    """The reply a step stands for; call ids are unique within the run (`call_<index>_<n>`)."""
    if step.error is not None:
        raise ModelError(step.error, f"scripted model failure: {step.error}", retryable=step.error in RETRYABLE_ERRORS)
    steps = step.calls or ([step] if step.call is not None else [])
    calls = [
        ToolCall(
            id=f"call_{index}_{n}",
            name=s.call or "",
            arguments=s.args if isinstance(s.args, str) else json.dumps(s.args),
        )
        for n, s in enumerate(steps)
    ]
    return ModelReply(
        text=step.text,
        tool_calls=calls,
        usage=usage,
        finish_reason="tool_calls" if calls else "stop",
    )


def _is_call(step: Step) -> bool:
    return step.call is not None or bool(step.calls)


def _forced_function(choice: object) -> str | None:
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            return name
    return None


def _asked_to_answer(request: ModelRequest) -> bool:
    """No tools offered and the last message is the runtime asking for the answer. (With
    tools merely narrowed away mid-collapse, a collapsed model goes on calling them.)"""
    last = request.messages[-1] if request.messages else {}
    return not request.tools and last.get("role") == "user"


class CaseModel:
    """Plays a `ModelSpec`. Token usage grows with the conversation (about 4 characters a
    token), so token waste measured on it has the shape of a real run's."""

    def __init__(self, spec: ModelSpec) -> None:
        self.name = spec.name
        self.spec = spec
        self.requests: list[ModelRequest] = []
        self._script, self._then = self._initial()
        self._position = 0
        self._nudged = False
        self._users_seen: int | None = None
        self._last_call: Step | None = None

    def _initial(self) -> tuple[list[Step], str]:
        if self.spec.repeat_forever is not None:
            return [self.spec.repeat_forever], "repeat_last"
        if self.spec.cycle:
            return list(self.spec.cycle), "cycle"
        return list(self.spec.script), self.spec.then

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        usage = self._usage(request)
        self._maybe_obey_nudge(request)
        obeyed = self._obey(request, usage)
        if obeyed is not None:
            return obeyed
        step = self._peek()
        if self.spec.never_answers and (step is None or not request.tools):
            return self._calls_only(step, usage)
        if step is None or (_asked_to_answer(request) and _is_call(step)):
            # Nothing left, or told to answer with no tools: give the final answer.
            if step is None and self._then == "exhausted":
                raise ModelError("script_exhausted", "the case's model script ran out")
            return ModelReply(text=self.spec.final, usage=usage, finish_reason="stop")
        return self._advance(step, usage)

    def _advance(self, step: Step, usage: Usage) -> ModelReply:
        self._position += 1
        if _is_call(step):
            self._last_call = step
        return step_reply(step, len(self.requests), usage)

    def _obey(self, request: ModelRequest, usage: Usage) -> ModelReply | None:
        """An obeying model does what a forced `tool_choice` says; None: the script goes on."""
        if self.spec.tool_choice != "obey" or not request.tools:
            return None
        choice = request.tool_choice
        forced = _forced_function(choice)
        if choice == "required" and not _is_call(self._peek() or Step(text="-")):
            forced = str(request.tools[0].get("function", {}).get("name", ""))
        if forced:
            call = ToolCall(id=f"call_{len(self.requests)}_0", name=forced, arguments=json.dumps(self.spec.forced_args))
            return ModelReply(tool_calls=[call], usage=usage, finish_reason="tool_calls")
        if choice == "none":  # told not to call: it answers (a model that never answers says nothing)
            text = "" if self.spec.never_answers else self.spec.final
            return ModelReply(text=text, usage=usage, finish_reason="stop")
        return None

    def _calls_only(self, step: Step | None, usage: Usage) -> ModelReply:
        """Asked for the answer, a model that never answers replies with tool calls only."""
        if step is not None and _is_call(step):
            return self._advance(step.model_copy(update={"text": None}), usage)
        if self._last_call is not None:
            return step_reply(self._last_call.model_copy(update={"text": None}), len(self.requests), usage)
        return ModelReply(text="", usage=usage, finish_reason="stop")

    def _peek(self) -> Step | None:
        script = self._script
        if not script:
            return None
        if self._position < len(script):
            return script[self._position]
        if self._then == "repeat_last":
            return script[-1]
        if self._then == "cycle":
            return script[self._position % len(script)]
        return None

    def _maybe_obey_nudge(self, request: ModelRequest) -> None:
        """A user message that appears after the run began, with tools still offered, is the
        runtime steering the model; an obedient model switches to `on_nudge` once."""
        users = sum(1 for m in request.messages if m.get("role") == "user")
        first = self._users_seen is None
        grew = not first and users > (self._users_seen or 0)
        self._users_seen = users
        if first or not grew or self._nudged or self.spec.on_nudge is None or not request.tools:
            return
        self._nudged = True
        self._script, self._then, self._position = list(self.spec.on_nudge), self.spec.then, 0

    def _usage(self, request: ModelRequest) -> Usage:
        chars = sum(len(json.dumps(m, default=str)) for m in request.messages)
        return Usage(
            prompt_tokens=self.spec.prompt_tokens + chars // 4,
            completion_tokens=self.spec.completion_tokens,
        )


def build_model(spec: ModelSpec, case_dir: Path) -> Model:
    if spec.cassette is not None:
        return ReplayModel(load_cassette(case_dir / spec.cassette))
    return CaseModel(spec)
