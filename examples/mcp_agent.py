"""loopwarden agents on the tools of a real MCP server: the notes server of
`loopwarden.examples.mcp_notes`, with 200 catalogue tools besides its own, so the agent offers them
behind tool search. A model stuck re-reading one note over MCP is answered from memory and stopped
(the server's own count says the note was read once); a model that deletes a note waits for an
approval, which this script denies. Offline: the models are scripted, the server and its tools real.

    pip install 'loopwarden[mcp]'
    python examples/mcp_agent.py                  # starts the server itself, over stdio
    python -m loopwarden.examples.mcp_notes --http 8765 --catalogue 200   # or, in another terminal,
    python examples/mcp_agent.py --url http://127.0.0.1:8765/mcp          # reach it over streamable HTTP
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from loopwarden import Agent, ApprovalGate, FunctionModel, LoopConfig, ModelRequest, call
from loopwarden.events import ApprovalRequired, RunFinished, ToolCallFinished
from loopwarden.models.scripted import ReplyLike, offered_tool_names
from loopwarden.tools.mcp import MCPTools


def stuck(request: ModelRequest) -> ReplyLike:
    """A collapsed model: once it can, it reads the pump note, whatever it is told."""
    names = offered_tool_names(request)
    if not names:  # the guard ended the tool phase: answer from what was read
        return "The pump note says flow rose linearly with speed, peaking at 12.4 L/min."
    if "notes__read_note" in names:
        return call("notes__read_note", {"name": "pump"})
    return call("search_tools", {"query": "read a note"})


def tidy(request: ModelRequest) -> ReplyLike:
    """A model told to tidy up: it finds the delete tool and deletes the todo note."""
    names = offered_tool_names(request)
    last = request.messages[-1]
    if last.get("role") == "tool" and "notes__delete_note" in str(request.messages[-2]):
        return "I did not delete the todo note: the deletion was denied."
    if "notes__delete_note" in names:
        return call("notes__delete_note", {"name": "todo"})
    return call("search_tools", {"query": "delete a note"})


async def main(url: str | None) -> None:
    if url is None:
        notes = MCPTools.stdio(sys.executable, ["-m", "loopwarden.examples.mcp_notes", "--catalogue", "200"])
    else:
        notes = MCPTools.http(url)
    async with notes:
        print(f"server {notes.namespace!r}: {len(notes.tools)} tools")
        for tool in notes.tools[:5]:
            approval = ", needs approval" if tool.requires_approval else ""
            print(f"  {tool.wire_name}: {tool.side_effect}{approval}")

        model = FunctionModel(stuck)
        result = await Agent(model, [notes], config=LoopConfig(policy="degrade")).run("What does the pump note say?")
        first = offered_tool_names(model.requests[0])
        served = (await notes.call("served", {})).data
        print(f"offered on the first turn: {first}")
        print(f"stuck model: status={result.status} stop_reason={result.stop_reason}")
        print(f"read_note ran {served.get('read_note', 0)} time(s) on the server; answer: {result.output}")

        gate = ApprovalGate()
        agent = Agent(FunctionModel(tidy), [notes], approvals=gate)
        async for event in agent.stream("Tidy up: delete the todo note."):
            if isinstance(event, ApprovalRequired):
                print(f"approval asked: {event.tool} {event.arguments}")
                gate.deny(event.call_id, "the todo note is still needed", by="example")
            elif isinstance(event, ToolCallFinished) and event.tool == "notes__delete_note":
                print(f"delete_note: ok={event.ok} error_type={event.error_type}")
            elif isinstance(event, RunFinished):
                print(f"tidy model: status={event.status}; answer: {event.output}")
        notes_left = (await notes.call("list_notes", {})).data
        print(f"notes on the server: {notes_left}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", help="a streamable HTTP MCP server (default: start the notes server over stdio)")
    asyncio.run(main(parser.parse_args().url))
