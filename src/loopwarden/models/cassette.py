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

CASSETTE_VERSION = 1


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

    def __init__(self, inner: Model, *, meta: dict[str, Any] | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.cassette = Cassette(model=inner.name, meta=dict(meta or {}))

    async def complete(self, request: ModelRequest) -> ModelReply:
        try:
            reply = await self.inner.complete(request)
        except ModelError as error:
            recorded = RecordedError(
                kind=error.kind, message=error.message, retryable=error.retryable, status=error.status
            )
            self.cassette.interactions.append(Interaction(request=request, error=recorded))
            raise
        self.cassette.interactions.append(Interaction(request=request, reply=reply))
        return reply

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


def save_cassette(cassette: Cassette, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(cassette.model_dump_json(indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def load_cassette(path: Path) -> Cassette:
    return Cassette.model_validate_json(path.read_text(encoding="utf-8"))
