"""Against a real model through a real server (llama-cpp-python, Gemma 3 270M; tests/llama_server.py):
doctor, a guarded tool loop on a model that repeats itself, and `loopwarden report` end to end.
The model's exchanges are recorded as cassettes and imported as eval cases, so what a real model
did stays in the offline suite (`LOOPWARDEN_LLAMA_RECORD_DIR` keeps them; evals/llama-*.yaml)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from helpers import require_binary
from llama_server import CONTEXT_WINDOW, GREEDY, LlamaServer
from loopwarden import Agent, LoopConfig, tool
from loopwarden.cli import build_app
from loopwarden.eval.case import load_case
from loopwarden.eval.runner import run_case
from loopwarden.models.cassette import RecordingModel
from loopwarden.models.config import EndpointConfig, load_endpoint_config
from loopwarden.models.openai_compat import build_model

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
REPORT_WITHIN = 1800.0
"""Seconds the whole `loopwarden report` run may take before the test fails (a bound, not a goal)."""
GUARD_STOPS = {"repeated_call", "cycle", "no_progress", "error_loop", "repetition", "monologue"}


def endpoint(server: LlamaServer) -> EndpointConfig:
    config = load_endpoint_config(
        preset="llamacpp",
        base_url=server.base_url,
        env={},
        context_window=CONTEXT_WINDOW,
        timeout=300,
        max_retries=1,
        extra_body=GREEDY,
    )
    assert config is not None
    return config


def keep(path: Path, name: str) -> None:
    """Copy a recording to LOOPWARDEN_LLAMA_RECORD_DIR when set (how evals/llama-* were made)."""
    folder = os.environ.get("LOOPWARDEN_LLAMA_RECORD_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / name)


def test_doctor_passes_or_names_what_the_endpoint_lacks(llama_server: LlamaServer, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200", "LOOPWARDEN_API_KEY": None}
    args = ["doctor", "--preset", "llamacpp", "--base-url", llama_server.base_url, "--timeout", "300"]
    result = CliRunner().invoke(build_app(), args, env=env)
    out = result.output
    assert "key accepted" not in out and "no key sent" in out
    assert "✓ cheap model: 'default': this server answers any model name" in out
    if result.exit_code == 0:
        assert "tool round trip" in out and "accepted with content" in out, out
    else:  # what the endpoint lacks is named, with what to do about it
        assert result.exit_code == 1 and "✗" in out and "fix:" in out, out


@tool
def read_file(path: str) -> str:
    """Read a text file of the project.

    Args:
        path: the file path, e.g. notes.txt
    """
    return "notes.txt: Hall probe scan. Peak field 12.4 mT at x = 3.0 mm; noise 0.05 mT."


@tool(terminal=True)
def finish(answer: str) -> str:
    """Give the final answer.

    Args:
        answer: the answer
    """
    return answer


async def test_a_repeating_real_model_is_ended_by_the_guard(llama_server: LlamaServer, tmp_path: Path) -> None:
    recorder = RecordingModel(build_model(endpoint(llama_server), "cheap"), meta={"model": "gemma-3-270m Q4_K_M"})
    config = LoopConfig(max_output_tokens=256)
    agent = Agent(
        recorder,
        [read_file, finish],
        system="You are a lab assistant. Use the functions to read files, then call finish with the answer.",
        config=config,
    )
    result = await agent.run("Read notes.txt and report the peak field.")  # never raises: a result, always
    verdicts = [e.model_dump() for e in result.events if e.type == "guard_verdict"]
    counted = Counter(f"{v['detector']}:{v['action']}" for v in verdicts)
    repaired = [e for e in result.events if e.type == "tool_call_proposed" and e.model_dump().get("repaired")]
    print(f"\nreal model tool loop: {result.status} {result.stop_reason}, {result.totals.model_calls} model calls;"
          f" verdicts {dict(counted)}; {len(repaired)} argument repair(s)")  # fmt: skip
    assert result.stop_reason != "model_error", result.events[-2]
    acted = {"cached", "nudged", "narrowed", "stopped"}
    stepped_in = {v["action"] for v in verdicts if v["detector"] != "guard"} & acted
    if stepped_in:  # the model repeated itself: the guard, not the model, ended the phase
        forced = "narrowed" in stepped_in and result.stop_reason == "terminal_tool"
        assert result.stop_reason in GUARD_STOPS or forced, (result.stop_reason, counted)
        assert result.totals.model_calls <= config.ladder.stop_at + 2  # the ladder's bound (+ the wrap-up)
    else:  # it read once and finished on its own
        assert result.stop_reason == "terminal_tool"

    cassette = recorder.save(tmp_path / "llama-tool-loop.cassette.json")
    keep(cassette, cassette.name)
    case_file = tmp_path / "llama-tool-loop.yaml"
    imported = CliRunner().invoke(build_app(), ["eval-import", str(cassette), "-o", str(case_file)])
    assert imported.exit_code == 0, imported.output
    # Recorded under the guard already: the replay must end no later, and run nothing twice.
    case = yaml.safe_load(case_file.read_text())
    case["expect"]["max_model_calls"] = len(recorder.cassette.interactions)
    case_file.write_text(yaml.safe_dump(case, sort_keys=False))
    replayed = await run_case(load_case(case_file))
    assert replayed.passed, replayed.reasons  # the real model's behaviour, now offline and deterministic


def _stage_rows(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃| ").split("│")]
        if len(cells) == 2 and "model calls" in cells[1] and cells[0] not in ("model calls",):
            rows[cells[0]] = cells[1]
    return rows


def test_loopwarden_report_on_the_real_model_ends_with_a_pdf(llama_server: LlamaServer, tmp_path: Path) -> None:
    require_binary("xelatex")
    out, records = tmp_path / "out", tmp_path / "cassettes"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("LOOPWARDEN_", "DEEPSEEK_", "OPENAI_"))},
        "HOME": str(tmp_path),
        "COLUMNS": "200",
        "LOOPWARDEN_CONTEXT_WINDOW": str(CONTEXT_WINDOW),
        "LOOPWARDEN_TIMEOUT": "300",
        "LOOPWARDEN_MAX_RETRIES": "1",
        "LOOPWARDEN_EXTRA_BODY": json.dumps(GREEDY),
        "LOOPWARDEN_RECORD_DIR": str(records),
    }
    loopwarden = Path(sys.executable).with_name("loopwarden")
    command = [str(loopwarden), "report", str(REPO / "examples" / "field-scan"), "--out", str(out)]
    command += ["--preset", "llamacpp", "--base-url", llama_server.base_url]
    # Two drafts, not the default three: this model's drafts are rejected every time (the same greedy
    # replies each run), and the second already shows a rejected draft told why and asked again on a
    # real server; the third cost ~12 s of the server's CPU and showed nothing more.
    command += ["--draft-attempts", "2"]
    # The brief template: its skeleton is part of every draft request, and this test checks the PDF,
    # the stages and the counted calls, not the template. The model's replies were the same
    # (greedy); the run's server CPU 22.6-23.8 -> 19.5 s (the draft prompt is the largest one).
    command += ["--template", "brief"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=REPORT_WITHIN, check=False)
    print(done.stdout[-4000:])
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / "report.pdf").is_file() and (out / "report.pdf").stat().st_size > 0
    stages = _stage_rows(done.stdout)
    assert "explore" in stages, done.stdout[-3000:]  # every stage that asked the model: calls and errors
    assert all(" errors" in figures for figures in stages.values())
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    asked = sum(e.get("attempts", 1) for e in events if e["type"] == "model_called")
    failed = sum(e.get("attempts", 0) for e in events if e["type"] == "model_failed")
    finished: dict[str, Any] = events[-1]
    assert finished["type"] == "report_finished"
    assert finished["totals"]["model_calls"] == asked + failed  # every attempt that reached the server counted

    for cassette in sorted(records.glob("*.cassette.json")):
        keep(cassette, f"llama-report-{cassette.name.split('-')[0]}.cassette.json")
        case_file = tmp_path / (cassette.name.removesuffix(".cassette.json") + ".yaml")
        imported = CliRunner().invoke(build_app(), ["eval-import", str(cassette), "-o", str(case_file)])
        assert imported.exit_code == 0, imported.output
