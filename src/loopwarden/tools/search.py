"""Tool search for large registries (progressive disclosure): instead of 200 schemas, the model
is offered `search_tools(query)`; BM25 (bm25s) over names, namespaces, descriptions and argument
names finds a handful, and those are offered from the next turn on."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import Tool, ToolRegistry, ToolResult, tool

SEARCH_TOOL = "search_tools"

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
        "me",
        "my",
        "i",
        "you",
        "your",
    ]
)


def _stem(word: str) -> str:
    # Plurals and -ing/-ed endings only: enough to match "trends"/"trend", "sending"/"send".
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + keep
    return word


def tokens(text: str) -> list[str]:
    spaced = _CAMEL.sub(" ", text).replace("_", " ").replace(".", " ").lower()
    return [_stem(w) for w in _WORD.findall(spaced) if w not in _STOPWORDS]


def tool_text(item: Tool) -> str:
    """What a tool is found by: its name twice (names matter most), namespace, description, args."""
    fields = item.args_model.model_fields
    args = " ".join(f"{name} {f.description or ''}" for name, f in fields.items())
    return f"{item.name} {item.name} {item.namespace or ''} {item.description} {args}"


class ToolIndex:
    """A BM25 index over a fixed set of tools."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools = list(tools)
        self._bm25: Any = None
        if self.tools:
            import bm25s  # numpy with it: loaded when a run first searches tools, not with loopwarden

            self._bm25 = bm25s.BM25()
            self._bm25.index([tokens(tool_text(t)) or ["_"] for t in self.tools], show_progress=False)

    def search(self, query: str, limit: int = 5) -> list[tuple[Tool, float]]:
        """The best matches with a positive score, best first; nothing for an empty query."""
        words = tokens(query)
        if not words or self._bm25 is None or limit <= 0:
            return []
        k = min(limit, len(self.tools))
        documents, scores = self._bm25.retrieve([words], k=k, show_progress=False)
        found = [(self.tools[int(d)], float(s)) for d, s in zip(documents[0], scores[0], strict=True)]
        return [(t, s) for t, s in found if s > 0]


@dataclass(frozen=True)
class ToolSearch:
    """Configuration of progressive disclosure for an Agent.

    `always`: tools offered from the first turn besides the search tool. `max_discovered`:
    how many found tools are offered at once (the most recently found are kept)."""

    limit: int = 5
    max_discovered: int = 6
    always: tuple[str, ...] = ()
    name: str = SEARCH_TOOL

    def build_tool(self, registry: ToolRegistry) -> Tool:
        """The `search_tools` tool over every tool in `registry` except itself (indexed on first
        use, and again when tools were added since)."""
        built: dict[int, ToolIndex] = {}  # registry size -> its index
        lock = threading.Lock()  # searches run in worker threads, maybe several at once
        limit = self.limit

        def index() -> ToolIndex:
            with lock:
                size = len(registry)
                if size not in built:
                    built.clear()
                    built[size] = ToolIndex(t for t in registry if t.qualified_name != self.name)
                return built[size]

        def search_tools(query: str, limit: int = limit) -> ToolResult:
            found = index().search(query, max(1, min(limit, self.limit)))
            if not found:
                return ToolResult.failure(
                    "no_match",
                    f"no tool matches {query!r}",
                    user_action="search again with other words (what the tool does, not how)",
                )
            return ToolResult.success(
                {"found": [{"name": t.wire_name, "description": t.description} for t, _ in found]},
                message="these tools are available to call from your next turn",
            )

        search_tools.__doc__ = (
            "Find tools by what they do. The tools found can be called from the next turn on.\n\n"
            "Args:\n"
            "    query: a few words saying what the tool should do, e.g. 'weather forecast for a city'\n"
            "    limit: how many tools to return at most\n"
        )
        return tool(name=self.name)(search_tools)


def found_names(result: ToolResult) -> list[str]:
    """The wire names a successful search result lists."""
    data = result.data
    if not result.ok or not isinstance(data, dict) or not isinstance(data.get("found"), list):
        return []
    return [str(item["name"]) for item in data["found"] if isinstance(item, dict) and "name" in item]


def keep_recent(current: Sequence[str], new: Sequence[str], cap: int) -> list[str]:
    """Newly found first, then older finds, without duplicates, at most `cap`."""
    merged: list[str] = []
    for name in [*new, *current]:
        if name not in merged:
            merged.append(name)
    return merged[: max(cap, 0)]
