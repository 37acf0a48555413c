"""Shared pieces of the proxy tests: a proxy on a real uvicorn in front of a scripted upstream,
and a minimal client agent loop driven through the real `openai` SDK (the client runs the tools,
as a coding agent does)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from openai import OpenAI

from loopwarden import Agent, ScriptedModel, call, tool
from loopwarden.proxy.app import create_proxy
from loopwarden.proxy.settings import build_settings
from openai_server import ScriptedServer
from server_jobs import serve_in_thread

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
FINISH = {
    "type": "function",
    "function": {
        "name": "finish",
        "description": "Finish with an answer",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    },
}


@contextmanager
def proxy_in_front(upstream: ScriptedServer, db: Path | None = None, **options: Any) -> Iterator[str]:
    """A proxy on 127.0.0.1 in front of `upstream`; yields its base URL (…/v1)."""
    settings = build_settings(upstream=upstream.base_url, db=db, **options)
    with serve_in_thread(create_proxy(settings)) as base:
        yield base + "/v1"


def client_loop(
    base_url: str,
    prompt: str,
    run_tool: Callable[[str, str], str],
    *,
    tools: list[dict[str, Any]] | None = None,
    max_turns: int = 30,
    stream: bool = False,
) -> tuple[str, int, list[dict[str, Any]]]:
    """A client agent loop: ask, run every tool call the reply asks for, ask again, until a reply
    has no tool calls. Returns (final text, turns taken, messages)."""
    client = OpenAI(base_url=base_url, api_key="sk-client-key", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for turn in range(1, max_turns + 1):
        if stream:
            text, calls = _streamed(client, messages, tools or [READ_FILE])
        else:
            response = client.chat.completions.create(model="m", messages=messages, tools=tools or [READ_FILE])  # type: ignore[arg-type]
            message = response.choices[0].message
            text = message.content or ""
            calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        if not calls:
            return text, turn, messages
        messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
                ],
            }
        )
        for call_id, name, arguments in calls:
            messages.append({"role": "tool", "tool_call_id": call_id, "content": run_tool(name, arguments)})
    raise AssertionError(f"the client loop did not end within {max_turns} turns")


def _streamed(
    client: OpenAI, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str, list[tuple[str, str, str]]]:
    text: list[str] = []
    calls: dict[int, list[str]] = {}
    for chunk in client.chat.completions.create(model="m", messages=messages, tools=tools, stream=True):  # type: ignore[arg-type]
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
            for part in choice.delta.tool_calls or []:
                slot = calls.setdefault(part.index, ["", "", ""])
                slot[0] = slot[0] or (part.id or "")
                if part.function is not None:
                    slot[1] += part.function.name or ""
                    slot[2] += part.function.arguments or ""
    return "".join(text), [(i, n, a) for i, n, a in (calls[k] for k in sorted(calls))]


def in_process_phase_calls() -> int:
    """Model calls of the tool phase when loopwarden's own runtime meets the same collapse: the
    bound a proxied run must keep."""

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return "hello from a.txt"

    model = ScriptedModel([call("read_file", {"path": "a.txt"})] * 10 + ["answer"])
    result = Agent(model, [read_file]).run_sync("summarise a.txt")
    assert result.stop_reason == "repeated_call"
    stop = next(i for i, e in enumerate(result.events) if e.type == "guard_verdict" and e.action == "stopped")  # type: ignore[attr-defined]
    return sum(1 for e in result.events[:stop] if e.type == "model_called")  # the wrap-up calls come after
