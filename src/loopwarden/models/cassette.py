"""Record and replay model traffic. Wrap any model in `RecordingModel` and every request and
reply (or failure) is kept; save it as a cassette (JSON) and `ReplayModel` plays it back
deterministically, so a production badcase becomes a regression case.

    recorder = RecordingModel(real_model)
    await Agent(recorder, tools).run("...")
    recorder.save(Path("badcase.cassette.json"))

    replay = ReplayModel(load_cassette(Path("badcase.cassette.json")))
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .base import Model, ModelError, ModelReply, ModelRequest

CASSETTE_VERSION = 2
"""2: request histories stored as the messages added since the previous request."""


class RecordedError(BaseModel):
    kind: str
    message: str
    retryable: bool = False
    status: int | None = None


class Interaction(BaseModel):
    request: ModelRequest
    reply: ModelReply | None = None
    error: RecordedError | None = None


class Cassette(BaseModel):
    version: int = CASSETTE_VERSION
    model: str
    interactions: list[Interaction] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)


def request_key(request: ModelRequest) -> str:
    """What a replayed request must match: the tools offered and the roles of the history
    (content may legitimately differ, e.g. timestamps in tool results)."""
    shape = {
        "tools": sorted(t.get("function", {}).get("name", "") for t in request.tools),
        "roles": [m.get("role") for m in request.messages],
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


class RecordingModel:
    """Passes every request through to `inner` and records what came back."""

    def __init__(self, inner: Model, *, meta: dict[str, Any] | None = None, autosave: Path | None = None) -> None:
        """`autosave`: write the cassette there after every exchange (a run that is cut off
        still leaves what it had said)."""
        self.inner = inner
        self.name = inner.name
        self.cassette = Cassette(model=inner.name, meta=dict(meta or {}))
        self.autosave = autosave

    @property
    def context_window(self) -> int | None:
        window = getattr(self.inner, "context_window", None)
        return window if isinstance(window, int) else None

    async def complete(self, request: ModelRequest) -> ModelReply:
        try:
            reply = await self.inner.complete(request)
        except ModelError as error:
            recorded = RecordedError(
                kind=error.kind, message=error.message, retryable=error.retryable, status=error.status
            )
            self._add(Interaction(request=request, error=recorded))
            raise
        self._add(Interaction(request=request, reply=reply))
        return reply

    def _add(self, interaction: Interaction) -> None:
        self.cassette.interactions.append(interaction)
        if self.autosave is not None:
            self.save(self.autosave)

    def save(self, path: Path) -> Path:
        return save_cassette(self.cassette, path)


class Divergence(BaseModel):
    index: int
    expected: str
    got: str


class ReplayModel:
    """Answers the n-th request with the n-th recorded reply (or raises the recorded failure).
    A request whose shape differs from the recorded one is noted in `divergences` (replay goes
    on: a changed runtime is exactly what a regression case is for). Past the end of the
    cassette it fails with `cassette_exhausted`."""

    def __init__(self, cassette: Cassette, *, name: str | None = None) -> None:
        self.cassette = cassette
        self.name = name or cassette.model
        self.requests: list[ModelRequest] = []
        self.divergences: list[Divergence] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.cassette.interactions):
            raise ModelError(
                "cassette_exhausted", f"the cassette has {len(self.cassette.interactions)} replies; asked for more"
            )
        recorded = self.cassette.interactions[index]
        expected, got = request_key(recorded.request), request_key(request)
        if expected != got:
            self.divergences.append(Divergence(index=index, expected=expected, got=got))
        if recorded.error is not None:
            e = recorded.error
            raise ModelError(e.kind, e.message, retryable=e.retryable, status=e.status)
        assert recorded.reply is not None
        return recorded.reply.model_copy(deep=True)

    @property
    def calls(self) -> int:
        return len(self.requests)


def _compact(cassette: Cassette) -> dict[str, Any]:
    """The cassette as JSON data, each request's history stored as the messages added since the
    previous request (`prefix` = how many it shares), so a long run's file grows linearly."""
    data = cassette.model_dump(mode="json")
    previous: list[Any] = []
    for item in data["interactions"]:
        messages = item["request"]["messages"]
        shared = len(previous) if messages[: len(previous)] == previous else 0
        item["request"]["prefix"] = shared
        item["request"]["messages"] = messages[shared:]
        previous = messages
    data["version"] = CASSETTE_VERSION
    return data


def _expand(data: dict[str, Any]) -> Cassette:
    previous: list[Any] = []
    for item in data.get("interactions", []):
        request = item.get("request", {})
        shared = request.pop("prefix", 0)
        if not isinstance(shared, int) or not 0 <= shared <= len(previous):
            raise ValueError(f"bad cassette: a request shares {shared!r} messages with one of {len(previous)}")
        request["messages"] = previous[:shared] + list(request.get("messages", []))
        previous = request["messages"]
    return Cassette.model_validate(data)


def save_cassette(cassette: Cassette, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_compact(cassette), indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return path


def load_cassette(path: Path) -> Cassette:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a cassette is a JSON object")
    return _expand(data)
