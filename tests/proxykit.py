"""Shared pieces of the proxy tests: a proxy on a real uvicorn in front of a scripted upstream,
and a minimal client agent loop driven through the real `openai` SDK (the client runs the tools,
as a coding agent does)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from openai import OpenAI

from loopwarden import Agent, ScriptedModel, call, tool
from loopwarden.proxy.app import create_proxy
from loopwarden.proxy.settings import build_settings
from openai_server import Reply, ScriptedServer, completion, reply, tool_call
from server_jobs import free_port, serve_in_thread

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
    finish: str | None = None,
) -> tuple[str, int, list[dict[str, Any]]]:
    """A client agent loop: ask, run every tool call the reply asks for, ask again, until a reply
    has no tool calls (or calls the client's own `finish` tool: its arguments are the answer).
    Returns (final text, turns taken, messages)."""
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
        if finish is not None and any(name == finish for _, name, _ in calls):
            return next(a for _, n, a in calls if n == finish), turn, messages
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


def honouring_tool_choice(repeat: dict[str, Any], answer: str) -> Callable[[dict[str, Any]], Reply]:
    """An upstream whose model repeats one call, and obeys `tool_choice` as a real API does: a
    forced function is called, "none" gets `answer` as text."""

    def respond(body: dict[str, Any]) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return reply(completion(tool_calls=[tool_call(choice["function"]["name"], {"answer": answer})]))
        if choice == "none":
            return reply(completion(text=answer))
        return reply(completion(tool_calls=[tool_call(repeat["name"], repeat["arguments"])]))

    return respond


def wait_for_port(port: int, process: subprocess.Popen[str]) -> None:
    done = threading.Event()
    for _ in range(600):  # up to 60 s on a loaded machine; returns as soon as it listens
        if process.poll() is not None:
            raise AssertionError(f"the proxy exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        done.wait(0.1)
    raise AssertionError("the proxy did not start listening")


def decisions_printed_for_a_coding_agent() -> list[str]:
    """What `loopwarden proxy --terminal-tool finish` prints on its terminal while a coding agent
    (the openai SDK, running its own tools) works through it against a model that keeps reading
    the same file: the README's sample, each line without its time."""
    read = {"name": "read_file", "arguments": {"path": "src/app.py"}}
    with ScriptedServer(respond=honouring_tool_choice(read, "app.py starts the server in main().")) as upstream:
        port = free_port()
        command = [sys.executable, "-m", "loopwarden.cli", "proxy", "--upstream", upstream.base_url]
        command += ["--port", str(port), "--terminal-tool", "finish"]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for_port(port, process)
            tools = [READ_FILE, FINISH]
            base = f"http://127.0.0.1:{port}/v1"
            client_loop(base, "What does src/app.py do?", lambda n, a: "def main(): ...", tools=tools, finish="finish")
        finally:
            process.terminate()
            printed = process.communicate(timeout=30)[1]
    return [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in printed.splitlines() if re.match(r"^\d\d:", line)]
