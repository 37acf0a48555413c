"""Replay made incremental: a request's guarded run, paused where the client took over (after the
guard's verdicts on the live reply, before the calls run), is kept under the hash of the history
the client will send next, and the next request resumes it instead of replaying every turn again.

The key is a hash of what the run saw: the request's opening messages as sent, each assistant
turn of the task as the run reads it (text and calls), every other message as sent, and what
shapes the run besides the history (its id, the model name, the declared tools, the policy). The
live reply is hashed the way the client's echo of it will be read, so the next request finds the
run only if the client sent back exactly what the run saw; anything else (a restart, another
proxy process, an edited history, a retried request whose run was already resumed) is a miss,
and the run is replayed in full — the verdicts are the same either way (tests/test_proxy_resume.py).

A paused run is used once: it is taken out of the cache when resumed. The cache is an LRU,
bounded by entries and by the bytes of history they hold.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Protocol

from ..models.base import Message, ModelReply

DEFAULT_ENTRIES = 256
DEFAULT_BYTES = 256 * 1024 * 1024


class Paused(Protocol):
    size: int

    async def aclose(self) -> None: ...


class HistoryHash:
    """sha256 over a conversation's messages in the form the run reads them, one at a time."""

    def __init__(self, context: Any) -> None:
        self._hash = hashlib.sha256(_canonical(context).encode("utf-8", "surrogatepass"))
        self.size = 0

    def add_message(self, message: Message) -> None:
        self._add(["message", message])

    def add_reply(self, reply: ModelReply) -> None:
        self._add(["reply", reply.text, [[c.id, c.name, c.arguments] for c in reply.tool_calls]])

    def _add(self, item: Any) -> None:
        data = _canonical(item).encode("utf-8", "surrogatepass")
        self.size += len(data)
        self._hash.update(len(data).to_bytes(8, "big"))  # length-prefixed: no two histories hash alike
        self._hash.update(data)

    def copy(self) -> HistoryHash:
        twin = HistoryHash.__new__(HistoryHash)
        twin._hash, twin.size = self._hash.copy(), self.size
        return twin

    def digest(self) -> str:
        return self._hash.hexdigest()


def history_hashes(
    context: Any, opening: Iterable[Message], task: Iterable[Message], replies: list[ModelReply]
) -> tuple[str | None, HistoryHash]:
    """The key of the history up to the task's last assistant turn (None when the task has none
    yet), and the hash of the whole request, to be extended by the live reply."""
    running = HistoryHash(context)
    for message in opening:
        running.add_message(message)
    prefix: str | None = None
    seen = 0
    for message in task:
        if message.get("role") == "assistant":
            running.add_reply(replies[seen])
            seen += 1
            if seen == len(replies):
                prefix = running.digest()
        else:
            running.add_message(message)
    return prefix, running


class ResumeCache:
    """Paused runs by history key, least recently stored evicted first."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._entries: OrderedDict[str, Paused] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, key: str) -> Paused | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._bytes -= entry.size
        return entry

    async def put(self, key: str, entry: Paused) -> None:
        if self.max_entries <= 0 or entry.size > self.max_bytes:
            await entry.aclose()
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size
            await old.aclose()
        self._entries[key] = entry
        self._bytes += entry.size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.size
            await evicted.aclose()

    async def aclose(self) -> None:
        while self._entries:
            _, entry = self._entries.popitem()
            await entry.aclose()
        self._bytes = 0


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
