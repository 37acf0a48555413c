"""A recorded run (cassette) becomes a case: the model replays the recorded replies, the tools
answer with the results they gave in the recording (matched by arguments), and the default
expectation is the one every badcase wants: fewer model calls than the recording, and no
identical call executed twice."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from ..models.cassette import Cassette, load_cassette, save_cassette

REPEAT_NOTICE = "[repeated call #"


def _canned(content: Any) -> dict[str, Any]:
    """A recorded tool message back to a canned result (loopwarden writes ToolResult JSON)."""
    try:
        parsed = json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return {"ok": True, "data": content}
    if isinstance(parsed, dict) and isinstance(parsed.get("ok"), bool):
        keys = ("ok", "data", "error_type", "message", "retryable")
        return {k: parsed[k] for k in keys if k in parsed}
    return {"ok": True, "data": parsed}


def _tools(cassette: Cassette) -> dict[str, dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    for interaction in cassette.interactions:
        for schema in interaction.request.tools:
            function = schema.get("function", {})
            name = function.get("name")
            if name and name not in tools:
                tools[name] = {
                    "name": name,
                    "description": function.get("description", ""),
                    "parameters": function.get("parameters") or None,
                }
    return tools


def _results(history: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per tool, `by_args` entries with the results that tool gave for those arguments, in order."""
    calls: dict[str, tuple[str, Any]] = {}
    for message in history:
        for c in message.get("tool_calls") or []:
            function = c.get("function", {})
            try:
                args = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = None
            calls[c.get("id", "")] = (function.get("name", ""), args)
    grouped: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for message in history:
        if message.get("role") != "tool" or message.get("tool_call_id") not in calls:
            continue
        name, args = calls[message["tool_call_id"]]
        content = message.get("content")
        if not isinstance(args, dict) or (isinstance(content, str) and REPEAT_NOTICE in content):
            continue  # refused or answered from the cache: not a result the tool gave
        key = json.dumps(args, sort_keys=True)
        entry = grouped[name].setdefault(key, {"args": args, "results": []})
        entry["results"].append(_canned(content))
    return {name: list(entries.values()) for name, entries in grouped.items()}


def case_data(cassette: Cassette, cassette_ref: str, *, name: str, intent: str) -> dict[str, Any]:
    if not cassette.interactions:
        raise ValueError("the cassette holds no model calls")
    first = cassette.interactions[0].request.messages
    history = max((i.request.messages for i in cassette.interactions), key=len)
    system = next((m.get("content") for m in first if m.get("role") == "system"), None)
    prompt = next((m.get("content") for m in first if m.get("role") == "user"), "")
    results = _results(history)
    tools = []
    for tool_name, spec in _tools(cassette).items():
        entry = {k: v for k, v in spec.items() if v}
        if results.get(tool_name):
            entry["by_args"] = results[tool_name]
        tools.append(entry)
    data: dict[str, Any] = {
        "name": name,
        "intent": intent,
        "description": f"imported from a recorded run of {cassette.model} ({len(cassette.interactions)} model calls)",
        "input": prompt if isinstance(prompt, str) else json.dumps(prompt),
    }
    if system:
        data["system"] = system
    data["tools"] = tools
    data["model"] = {"cassette": cassette_ref, "name": cassette.model}
    # The fixed runtime must end the run sooner than the recording did, and run nothing twice.
    data["expect"] = {"forbidden_repeats": True, "max_model_calls": max(len(cassette.interactions) - 1, 1)}
    return data


def case_from_cassette(path: Path, out: Path, *, name: str | None = None, intent: str = "default") -> str:
    """YAML text of a case replaying `path`; the cassette is referenced relative to `out`."""
    cassette = load_cassette(path)
    ref = os.path.relpath(path.resolve(), out.resolve().parent)
    data = case_data(cassette, ref, name=name or out.stem, intent=intent)
    header = "# Imported badcase: adjust `expect:` to what the fixed runtime must do.\n"
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def case_from_run(db: Path, run_id: str, out: Path, *, name: str | None = None, intent: str = "default") -> str:
    """YAML text of a case replaying a traced run (`Agent(trace=...)`, LOOPWARDEN_TRACE_DB): its
    model exchanges are written as a cassette next to `out` (`<out stem>.cassette.json`)."""
    from ..trace.exchanges import cassette_for_run
    from ..trace.store import RunStore

    if not db.is_file():
        raise ValueError(f"no run store at {db}")
    try:
        cassette = cassette_for_run(RunStore(db), run_id)
    except sqlite3.Error as error:  # not a run store, or a damaged one: say so, never a traceback
        raise ValueError(f"{db} is not a readable run store: {error}") from None
    path = save_cassette(cassette, out.with_name(f"{out.stem}.cassette.json"))
    return case_from_cassette(path, out, name=name, intent=intent)
