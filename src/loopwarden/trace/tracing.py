"""Every run traced with one argument: `Agent(..., trace="runs.db")` (or a `RunStore`, or a
callable that takes each event), or `LOOPWARDEN_TRACE_DB=runs.db` in the environment.

With a store, each event is committed as it passes (trace/recorder.py: the run row ends with
the run's status, or `failed`/`cancelled` if the run raises or is cancelled) and so is every
model request with its reply (trace/exchanges.py), so a stored run can be imported as an eval
case. A callable sink gets the events only.

The environment is read once, when the Agent is built (`resolve_trace`), never per run.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeGuard, overload

from ..errors import ConfigError
from ..events import Event
from ..models.base import Model

if TYPE_CHECKING:
    from ..events import EventStamper
    from ..hotpath.kept import Told
    from .store import RunStore
    from .writer import RunWriter

# The store (sqlite3), its writer, recorder and the exchange recorder load when a run is traced
# to a store: an Agent that does not trace never imports them.

TRACE_DB_ENV = "LOOPWARDEN_TRACE_DB"

EventSink = Callable[[Event], Any]
"""Called with each event in order; may return an awaitable (it is awaited before the event goes on)."""


class Tracer:
    """Where an Agent's runs go: a run store (events and model exchanges) or an event sink."""

    def __init__(self, store: RunStore | None = None, *, sink: EventSink | None = None, kind: str = "agent") -> None:
        if (store is None) == (sink is None):
            raise ConfigError("a Tracer needs exactly one of a store or a sink")
        self.store, self.sink, self.kind = store, sink, kind
        self._writers: dict[str, RunWriter] = {}  # a run's, from model() until record() takes it

    def model(self, model: Model, run_id: str) -> Model:
        """The model a run calls: with a store, every exchange is kept under `run_id`, committed
        with the run's events when `record` is given the same run id."""
        if self.store is None:
            return model
        from .exchanges import TracedModel
        from .writer import RunWriter

        writer = self._writers.get(run_id) or self._writers.setdefault(run_id, RunWriter(self.store, run_id))
        return TracedModel(model, self.store, run_id, writer)  # every model of the run shares the run's writer

    @overload
    def record(self, events: AsyncIterator[Event], run_id: str | None = None) -> AsyncIterator[Event]: ...
    @overload
    def record(
        self, events: AsyncIterator[Event], run_id: str | None, keep: EventStamper
    ) -> AsyncIterator[list[Told]]: ...
    def record(
        self, events: AsyncIterator[Event], run_id: str | None = None, keep: EventStamper | None = None
    ) -> AsyncIterator[Any]:
        """The run's events as they pass the store or the sink. `keep`: the run's stamper, when
        nobody reads the events before the run ends: a store then writes the step events from
        their dicts and passes each commit's events on as one list (trace/recorder.py). Only
        with a store: a sink is given every event built."""
        if self.store is not None:
            from .recorder import TraceRecorder
            from .writer import RunWriter

            if run_id is None:
                return TraceRecorder(self.store, kind=self.kind).record(events, keep)
            # The run's writer stays findable while it runs: a model handed to mid-run joins it.
            writer = self._writers.setdefault(run_id, RunWriter(self.store, run_id))
            recorder = TraceRecorder(self.store, kind=self.kind, writer=writer)
            recorder.on_done = lambda: self._writers.pop(run_id, None)
            return recorder.record(events, keep)
        assert self.sink is not None and keep is None
        return _to_sink(events, self.sink)

    def __repr__(self) -> str:
        return f"Tracer(store={self.store.path})" if self.store is not None else f"Tracer(sink={self.sink!r})"


TraceTarget: TypeAlias = "Tracer | RunStore | str | os.PathLike[str] | EventSink | bool | None"
"""What `Agent(trace=...)` takes (see resolve_trace)."""


async def _to_sink(events: AsyncIterator[Event], sink: EventSink) -> AsyncIterator[Event]:
    async for event in events:
        returned = sink(event)
        if inspect.isawaitable(returned):
            await returned
        yield event


def resolve_trace(
    target: TraceTarget,
    environ: Mapping[str, str] | None = None,
) -> Tracer | Literal[False]:
    """What `Agent(trace=...)` means: None follows LOOPWARDEN_TRACE_DB (untraced when unset),
    False is never traced (not even by the environment), a path opens (and migrates) a store."""
    if target is False or target is True:
        if target:
            raise ConfigError("trace=True names no store: give a path, a RunStore or a callable")
        return False
    if target is None:
        path = (os.environ if environ is None else environ).get(TRACE_DB_ENV, "").strip()
        return Tracer(open_store(path, TRACE_DB_ENV)) if path else False
    if isinstance(target, Tracer):
        return target
    if _is_store(target):
        return Tracer(target)
    if isinstance(target, str | os.PathLike):
        return Tracer(open_store(os.fspath(target), "trace"))
    if callable(target):
        return Tracer(sink=target)
    raise TypeError(f"trace= takes a RunStore, a path or a callable, not {type(target).__name__}")


def _is_store(target: object) -> TypeGuard[RunStore]:
    """Whether `target` is a RunStore (no store can exist before its module was imported)."""
    store = sys.modules.get("loopwarden.trace.store")
    return store is not None and isinstance(target, store.RunStore)


def open_store(path: str, where: str) -> RunStore:
    """A store at `path`; a path that cannot hold one fails here, when the Agent is built, and
    says which setting to fix (not on the first event of the first run).

    The store of a file is opened once and kept for the next Agent of the same file (an Agent
    built per request or per run would otherwise open two connections, read the schema and
    check the migrations each time) while the path is the same file: a store whose file was
    deleted or replaced since is dropped, never written to again. Dropping it is safe for the
    new file: SQLite (3.8.3 and later, unix VFS) neither checkpoints nor deletes the log by
    name when the file a connection closes has moved (tests/test_trace_open.py)."""
    import sqlite3

    from .store import RunStore

    file = Path(path).expanduser()
    key = os.path.abspath(file)
    try:
        with _stores_lock:
            kept = _stores.pop(key, None)
            if kept is not None and kept[0] is not None and kept[0] == _identity(key):
                _stores[key] = kept  # the most recently used last
                return kept[1]
            store = RunStore(file)
            if sqlite3.sqlite_version_info >= (3, 8, 3):  # older ones delete the new file's log on close
                _stores[key] = (_identity(key), store)
            while len(_stores) > KEPT_STORES:
                del _stores[next(iter(_stores))]  # the least recently used: its connections close with it
            return store
    except Exception as error:  # sqlite3.Error, OSError: either way the setting is wrong
        raise ConfigError(f"{where}: cannot open a run store at {path!r}: {error}") from error


KEPT_STORES = 8
"""Stores kept open for the next Agent of their file (each holds a connection per thread that used it)."""
_stores: dict[str, tuple[tuple[int, int] | None, RunStore]] = {}
_stores_lock = threading.Lock()


def _identity(path: str) -> tuple[int, int] | None:
    """Which file `path` is now (None: there is none)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def default_trace_db(environ: Mapping[str, str] | None = None) -> Path:
    """Where the CLI keeps its runs: LOOPWARDEN_TRACE_DB, else the user's data folder
    ($XDG_DATA_HOME/loopwarden/runs.db, default ~/.local/share/loopwarden/runs.db)."""
    env = os.environ if environ is None else environ
    if env.get(TRACE_DB_ENV, "").strip():
        return Path(env[TRACE_DB_ENV].strip()).expanduser()
    data = env.get("XDG_DATA_HOME", "").strip()
    return (Path(data) if data else Path.home() / ".local" / "share") / "loopwarden" / "runs.db"
