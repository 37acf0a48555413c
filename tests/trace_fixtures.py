"""A small agent with a checklist whose run has every kind of event a trace must keep."""

from __future__ import annotations

from loopwarden import Agent, ChecklistItem, ModelRequest, tool
from loopwarden.models.scripted import ReplyLike, call

NOTES = {"a.txt": "alpha", "b.txt": "beta"}


@tool
def read_file(path: str) -> str:
    """Read a note.

    Args:
        path: file name
    """
    if path not in NOTES:
        raise FileNotFoundError(path)
    return NOTES[path]


def reads_then_collapses(request: ModelRequest) -> ReplyLike:
    """Reads a.txt, asks for a missing file, then repeats a.txt until stopped."""
    results = sum(1 for m in request.messages if m["role"] == "tool")
    if not request.tools and request.messages[-1]["role"] == "user":  # asked to wrap up
        return "alpha, from a.txt."
    if results == 1:
        return call("read_file", {"path": "missing.txt"})
    return call("read_file", {"path": "a.txt"})


def collapsing_agent() -> Agent:
    from loopwarden import FunctionModel

    return Agent(
        FunctionModel(reads_then_collapses, name="collapser"),
        [read_file],
        checklist=[
            ChecklistItem("read_a", "read_file"),
            ChecklistItem("read_b", "read_file", lambda a, r: a == {"path": "b.txt"}),
        ],
    )
