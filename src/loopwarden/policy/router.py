"""Intent routing: before the first model call, code decides what the request is about, and so
which few tools the model may see, which values are already fixed, what "done" means and how
many steps it may take.

Two routers ship: `RuleRouter` (keywords and regular expressions) and `ClassifierRouter` (any
function, e.g. `model_classifier`: one model call that must answer with one intent from an
enum). No match, an ambiguous match or low confidence never falls back to the full registry:
it becomes a clarifying question, or the declared safe supplementary tool set.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from ..errors import ConfigError
from ..models.base import Model, ModelRequest, Usage
from ..state import ChecklistItem
from .slots import Normaliser, RunClock, SlotSpec

RouteMethod = Literal["rule", "classifier", "fallback"]

DEFAULT_QUESTION = "I am not sure what you would like me to do. Could you say it more precisely?"


@dataclass(frozen=True)
class Intent:
    """What a request is about, and everything that follows from it."""

    name: str
    description: str = ""
    tools: tuple[str, ...] = ()
    """Qualified tool names offered for this intent; nothing else is."""
    slots: tuple[SlotSpec, ...] = ()
    checklist: tuple[ChecklistItem, ...] = ()
    max_tool_rounds: int | None = None
    """Tool rounds allowed for this intent, on top of the global budget."""
    normalisers: Mapping[str, Normaliser] = field(default_factory=dict)
    """Argument name (or `tool.argument`) -> normaliser, applied to every proposed call."""
    keywords: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    """Regular expressions that must all match for a rule router to consider this intent."""
    excludes: tuple[str, ...] = ()
    """Regular expressions any of which rules this intent out."""
    instructions: str | None = None
    """Added to the conversation as a system message when the run starts."""


@dataclass(frozen=True)
class Fallback:
    """What happens when routing is not confident: ask, or run with a declared safe set."""

    question: str = DEFAULT_QUESTION
    safe_tools: tuple[str, ...] = ()
    max_tool_rounds: int | None = 3

    def intent(self) -> Intent | None:
        if not self.safe_tools:
            return None
        return Intent(
            name="fallback",
            description="safe supplementary tools",
            tools=self.safe_tools,
            max_tool_rounds=self.max_tool_rounds,
        )


@dataclass(frozen=True)
class Route:
    """The routing decision for one request. `question` set = ask the user instead of acting."""

    intent: Intent | None
    confidence: float
    method: RouteMethod
    slots: dict[str, Any] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    question: str | None = None
    evidence: tuple[str, ...] = ()
    candidate: str | None = None
    """The best intent the router saw, even when it was not confident enough to take it."""
    model: str | None = None
    usage: Usage | None = None
    """What routing spent on a model call, if it made one (counted in the run's totals)."""

    @property
    def intent_name(self) -> str | None:
        return self.intent.name if self.intent else None


class Router(Protocol):
    async def route(self, text: str, clock: RunClock) -> Route: ...


def fill_slots(intent: Intent, text: str, clock: RunClock, confidence: float, method: RouteMethod) -> Route:
    """Read the intent's slots from the request; a missing required slot becomes a question."""
    values: dict[str, Any] = {}
    for spec in intent.slots:
        try:
            value = spec.extract(text, clock)
        except Exception:  # an extractor that fails has found nothing
            value = None
        if value is not None:
            values[spec.name] = value
    missing = tuple(s.name for s in intent.slots if s.required and s.name not in values)
    question = " ".join(s.ask() for s in intent.slots if s.name in missing) or None
    return Route(intent, confidence, method, values, missing, question, candidate=intent.name)


def unsure(fallback: Fallback, confidence: float, candidate: str | None, evidence: tuple[str, ...]) -> Route:
    safe = fallback.intent()
    if safe is not None:
        return Route(safe, confidence, "fallback", evidence=evidence, candidate=candidate)
    return Route(None, confidence, "fallback", question=fallback.question, evidence=evidence, candidate=candidate)


def _intents_by_name(intents: Sequence[Intent]) -> dict[str, Intent]:
    by_name = {i.name: i for i in intents}
    if len(by_name) != len(intents):
        raise ConfigError("intent names must be unique")
    return by_name


# -- rule router ---------------------------------------------------------------------------------


def _matches(pattern: str, text: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def _keyword(word: str) -> str:
    return rf"(?<!\w){re.escape(word)}(?!\w)"


@dataclass
class RuleRouter:
    """Scores each eligible intent by the keywords and patterns it matches. Confidence is the
    best score's share of the two best scores: a tie is 0.5, a lone match 1.0."""

    intents: Sequence[Intent]
    fallback: Fallback = field(default_factory=Fallback)
    threshold: float = 0.6

    def __post_init__(self) -> None:
        _intents_by_name(self.intents)

    def score(self, intent: Intent, text: str) -> tuple[int, tuple[str, ...]]:
        if not all(_matches(p, text) for p in intent.requires) or any(_matches(p, text) for p in intent.excludes):
            return 0, ()
        hits = [w for w in intent.keywords if _matches(_keyword(w), text)]
        hits += [p for p in intent.patterns if _matches(p, text)]
        hits += list(intent.requires)
        return len(hits), tuple(hits)

    async def route(self, text: str, clock: RunClock) -> Route:
        scored = sorted(((*self.score(i, text), i) for i in self.intents), key=lambda item: item[0], reverse=True)
        if not scored or scored[0][0] == 0:
            return unsure(self.fallback, 0.0, None, ())
        best, evidence, intent = scored[0]
        second = scored[1][0] if len(scored) > 1 else 0
        confidence = best / (best + second)
        if confidence < self.threshold:
            return unsure(self.fallback, confidence, intent.name, evidence)
        route = fill_slots(intent, text, clock, confidence, "rule")
        return replace(route, evidence=evidence)


# -- classifier router ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassifierAnswer:
    """A classifier's answer with what it spent, for classifiers that call a model."""

    intent: str | None
    confidence: float
    model: str | None = None
    usage: Usage | None = None


Classification = tuple[str | None, float] | ClassifierAnswer
Classifier = Callable[[str, Sequence[Intent]], Classification | Awaitable[Classification]]


@dataclass
class ClassifierRouter:
    """Any function picks the intent (name or None, confidence); names it did not get offered
    count as no match."""

    intents: Sequence[Intent]
    classify: Classifier
    fallback: Fallback = field(default_factory=Fallback)
    threshold: float = 0.6

    def __post_init__(self) -> None:
        self._by_name = _intents_by_name(self.intents)

    async def route(self, text: str, clock: RunClock) -> Route:
        try:
            pending = self.classify(text, self.intents)
            answer = await pending if inspect.isawaitable(pending) else pending
            if not isinstance(answer, ClassifierAnswer):
                answer = ClassifierAnswer(*answer)
        except Exception as error:  # a failing classifier is "not sure", never a crash
            return unsure(self.fallback, 0.0, None, (f"classifier failed: {error}",))
        name, confidence = answer.intent, answer.confidence
        intent = self._by_name.get(name) if name else None
        if intent is None or confidence < self.threshold:
            route = unsure(self.fallback, confidence if intent else 0.0, name, ())
        else:
            route = fill_slots(intent, text, clock, confidence, "classifier")
        return replace(route, model=answer.model, usage=answer.usage)


CLASSIFY_TOOL = "choose_intent"
NO_INTENT = "none"


def classifier_request(text: str, intents: Sequence[Intent]) -> ModelRequest:
    """One forced tool call whose `intent` argument is an enum of the intents (and `none`)."""
    names = [i.name for i in intents]
    listing = "\n".join(f"- {i.name}: {i.description or i.name}" for i in intents)
    schema = {
        "type": "function",
        "function": {
            "name": CLASSIFY_TOOL,
            "description": "Choose the one intent the request is about.",
            "parameters": {
                "type": "object",
                "properties": {
                    "intent": {"type": "string", "enum": [*names, NO_INTENT]},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["intent", "confidence"],
                "additionalProperties": False,
            },
        },
    }
    system = (
        "Classify the user's request into exactly one of these intents, or `none` if none fits:\n"
        f"{listing}\nAnswer only by calling {CLASSIFY_TOOL}."
    )
    return ModelRequest(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
        tools=[schema],
        tool_choice={"type": "function", "function": {"name": CLASSIFY_TOOL}},
    )


def parse_classification(arguments: str, names: Sequence[str]) -> tuple[str | None, float]:
    """Malformed or out-of-enum answers are no match, never an exception."""
    try:
        data = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError):
        return None, 0.0
    if not isinstance(data, dict) or data.get("intent") not in names:
        return None, 0.0
    raw = data.get("confidence", 1.0)
    confidence = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else 0.0
    return str(data["intent"]), min(max(confidence, 0.0), 1.0)


def model_classifier(model: Model) -> Classifier:
    """A classifier that asks `model` once (cheap tier) to choose an intent from an enum."""

    async def classify(text: str, intents: Sequence[Intent]) -> Classification:
        reply = await model.complete(classifier_request(text, intents))
        calls = [c for c in reply.tool_calls if c.name == CLASSIFY_TOOL]
        names = [i.name for i in intents]
        name, confidence = parse_classification(calls[0].arguments, names) if calls else (None, 0.0)
        return ClassifierAnswer(name, confidence, reply.model or model.name, reply.usage)

    return classify
