"""What the proxy tells on its terminal while an agent works through it: one line per decision
of each request (the verdict on every call the model proposed, the detectors that stepped in, the
nudge or narrowing put into the next request, the end of a task), from the events the request
added to its run. Logged to `loopwarden.proxy.events` at INFO; `loopwarden proxy` prints them
to stderr unless `--quiet`."""

from __future__ import annotations

import json
import logging
from typing import Any

from .replay import Outcome

log = logging.getLogger("loopwarden.proxy.events")
WIDTH = 72


def announce(run_id: str, outcome: Outcome) -> None:
    if log.isEnabledFor(logging.INFO):
        for line in lines(run_id, outcome):
            log.info("%s", line)


def lines(run_id: str, outcome: Outcome) -> list[str]:
    said: list[str] = []
    arguments: dict[str, str] = {}
    for event in outcome.events[outcome.fresh :]:
        data = event.model_dump(mode="json")
        kind, turn = data["type"], data.get("turn")
        if kind == "tool_call_proposed":
            raw = data.get("raw_arguments") or json.dumps(data["arguments"], ensure_ascii=False)
            arguments[data["call_id"]] = _short(raw)  # as the model wrote them
        elif kind == "guard_verdict" and data.get("call_id"):
            call = f"{data.get('tool')}({arguments.get(data['call_id'], '')})"
            said.append(f"{run_id} turn {turn}  {call}  {_verdict(data)}")
        elif kind == "guard_verdict" and data["action"] != "allowed":
            said.append(f"{run_id} turn {turn}  {data['detector']}  {_verdict(data)}")
        elif kind == "nudge_injected":
            said.append(f"{run_id} turn {turn}  nudge added to the request upstream: {_short(data['text'])}")
        elif kind == "model_called" and data.get("tool_choice") not in (None, "auto"):
            choice = json.dumps(data["tool_choice"])
            said.append(f"{run_id} turn {turn}  sent upstream with tool_choice {choice}")
        elif kind == "run_finished":
            said.append(f"{run_id} task {data['status']}: {data['stop_reason']}")
    if outcome.stopped:
        said.append(f"{run_id} stopped ({outcome.stop_reason}): the client gets a stop message, not the calls")
    return said


def _verdict(data: dict[str, Any]) -> str:
    if data["action"] == "allowed":
        return "allowed"
    return f"{data['action']} by {data['detector']}: {_short(data['reason'])}"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"
