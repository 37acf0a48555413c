"""SIGKILL a real `loopwarden serve --durable` (embedded SQLite) running the real report pipeline
while its writing stage waits on the model, and start it again: the run resumes from its recorded
steps and ends with the events of a run nobody interrupted. The model is a real HTTP server
(OpenAI Chat Completions, scripted, answering from the conversation alone) that records every
request: after the restart it receives none of the exploration's, the image readings' (a vision
model called from inside a tool that reruns on recovery) or the drafts' requests again, only the
review request that was in flight at the kill."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from durable_kit import comparable, needs_durable, serve, stored_events, submit, wait_finished, wait_for
from openai_server import Reply, ScriptedServer, completion, tool_call, usage
from reportkit import make_folder, write_png

pytestmark = needs_durable

MODEL = "scripted-model"
DSML = '<｜DSML｜function_calls><｜DSML｜invoke name="read_file"></｜DSML｜invoke></｜DSML｜function_calls>'
DRAFT = (
    "\\documentclass{article}\n\\begin{document}\n\\section{Results}\n"
    "Soil temperature in field\\_scan.csv ranges from 11.9 to 13.1 C.\n\\end{document}\n"
)
FINISH = {
    "experiment": "Soil field scan",
    "goal": "Characterise soil temperature across sites",
    "key_findings": ["Soil temperature (field_scan.csv, soil_temp_c) ranges from 11.9 to 13.1 C"],
}
EXPLORE = [  # one turn each; the first has three calls, run side by side, two asking the vision model
    [("read_file", {"path": "field_scan.csv"}), ("read_image", {"path": "a.png"}), ("read_image", {"path": "b.png"})],
    [("read_file", {"path": "protocol.md"})],
    [("finish_exploration", FINISH)],
]


def digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:16]


class ScriptedModel:
    """Answers from the conversation alone (the same request gets the same reply in any run);
    while `hold` is set, the first review request waits until the test lets it go."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.release = threading.Event()
        self.held: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        answered = sum(1 for m in messages if m.get("role") == "assistant")
        if body.get("tools"):  # the exploration: read the files and images, then finish
            turn = EXPLORE[min(answered, len(EXPLORE) - 1)]
            calls = [tool_call(name, args, id=f"call_{answered + 1}_{i}") for i, (name, args) in enumerate(turn)]
            return Reply(body=completion(None, calls, model=MODEL, usage_=usage(400, 30)))
        if isinstance(messages[0]["content"], list):  # the vision model: say which image it was shown
            image = messages[0]["content"][1]["image_url"]["url"]
            seen = hashlib.sha256(image.encode()).hexdigest()[:8]
            return Reply(body=completion(f"a bar chart, image {seen}", model=MODEL, usage_=usage(500, 20)))
        if "You review" in str(messages[0].get("content")):
            if self.hold.is_set():
                self.held.append(digest(body))
                self.release.wait(60)
            verdict = {"major_issues": [], "minor_issues": ["tighten the wording"], "done": True}
            return Reply(body=completion(json.dumps(verdict), model=MODEL, usage_=usage(300, 40)))
        text = DRAFT if answered else DSML  # the first draft leaks markup and is rejected
        return Reply(body=completion(text, model=MODEL, usage_=usage(1000, 200)))


def test_a_report_killed_while_writing_resumes_without_asking_the_model_again(tmp_path: Path) -> None:
    allowed, state = tmp_path / "allowed", tmp_path / "state"
    for name in ("killed", "calm"):
        make_folder(allowed / name)
        write_png(allowed / name / "data" / "a.png")
        (allowed / name / "data" / "b.png").write_bytes(_other_png())
    model = ScriptedModel()
    model.hold.set()

    with ScriptedServer(respond=model) as server:
        settings = {"model": {"base_url": server.base_url, "model": MODEL}}
        with serve(state, allowed, job="") as (process, base):
            run_id = submit(base, "killed/data", **settings)
            wait_for(lambda: model.held, "the writing stage's review request", alive=process)
            os.kill(process.pid, signal.SIGKILL)
            process.wait(30)
        model.hold.clear()
        model.release.set()
        before_restart = [digest(b) for b in server.requests]

        with serve(state, allowed, job="") as (process, base):
            wait_finished(base, run_id, "the resumed report to finish", alive=process)
            resumed = stored_events(base, run_id)
            after_restart = [digest(b) for b in server.requests][len(before_restart) :]
            calm_id = submit(base, "calm/data", **settings)
            wait_finished(base, calm_id, "the uninterrupted report to finish", alive=process)
            uninterrupted = stored_events(base, calm_id)
            calm_requests = [digest(b) for b in server.requests][len(before_restart) + len(after_restart) :]

    assert resumed[-1]["type"] == "report_finished", resumed[-1]
    assert resumed[-1]["status"] == uninterrupted[-1]["status"] == "completed", resumed[-1]["message"]
    assert [e["seq"] for e in resumed] == list(range(1, len(resumed) + 1))
    in_flight = model.held[0]
    assert before_restart[-1] == in_flight
    # Before the kill: 3 exploration turns, 2 images read, 2 drafts (one rejected), the review running.
    assert len(before_restart) == 8 and len(set(before_restart)) == 8
    # After it: the review again (no reply was recorded for it), and nothing the first process was answered.
    assert after_restart[0] == in_flight
    assert not set(after_restart[1:]) & set(before_restart), "a model call answered before the kill was repeated"
    assert Counter(before_restart + after_restart) - Counter(calm_requests) == Counter({in_flight: 1})
    assert Counter(calm_requests) - Counter(before_restart + after_restart) == Counter()

    def same(events: list[dict[str, Any]], folder: str) -> list[dict[str, Any]]:
        text = json.dumps(comparable(events)[1:])  # [0] is run_queued: its folder differs
        return list(json.loads(text.replace(str(allowed / folder), "<folder>").replace(f"/{folder}/", "/<f>/")))

    assert same(resumed, "killed") == same(uninterrupted, "calm")
    stages = [(e["stage"], e["state"]) for e in resumed if e["type"] == "milestone"]
    assert ("draft", "done") in stages and ("reflect", "done") in stages


def _other_png() -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([1, 2, 3], [3, 1, 2])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()
