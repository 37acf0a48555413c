"""The public corpus (`evals/public/`): loop cases reconstructed from public issue threads, each
paired with a healthy near-miss. These tests hold the corpus to its own rules — every case cites the
thread it comes from, every loop has a healthy twin that names it back, every healthy case forbids
any intervention — without running the guard (the eval does that)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from loopwarden.eval.case import YAML_LOADER, load_case

EVALS = Path(__file__).resolve().parents[1] / "evals"
PUBLIC = EVALS / "public"


def raw_cases() -> dict[str, dict[str, Any]]:
    """Every public case file as written, by case name (the file name unless `name:` says otherwise)."""
    cases = {}
    for path in sorted(PUBLIC.glob("*.yaml")):
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=YAML_LOADER)  # the loader `eval` uses
        cases[data.get("name", path.stem)] = {**data, "_file": path.name}
    return cases


CASES = raw_cases()


def test_the_corpus_is_large_enough_and_mostly_public() -> None:
    every = [p for p in EVALS.rglob("*") if p.suffix in (".yaml", ".yml")]
    assert len(every) >= 100
    assert len(CASES) >= 60
    assert len({c["source"] for c in CASES.values()}) >= 30  # distinct public threads, not one thread 60 times


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_public_case_loads_and_cites_a_public_thread(name: str) -> None:
    case = CASES[name]
    load_case(PUBLIC / case["_file"])  # the real loader: schema, kinds, expectations
    url = urlparse(str(case.get("source", "")))
    assert url.scheme == "https" and url.netloc and url.path.strip("/"), f"{name}: source must be the thread's URL"
    assert case.get("kind") in ("loop", "healthy"), f"{name}: kind must be loop or healthy"
    assert len(case.get("description", "")) >= 60, f"{name}: say what was reported and how it is reconstructed"


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.get("kind") == "loop"))
def test_each_loop_has_a_healthy_twin_from_the_same_thread(name: str) -> None:
    loop = CASES[name]
    twin = CASES.get(loop.get("pair", ""))
    assert twin is not None, f"{name}: pair must name a healthy case in evals/public"
    assert twin["kind"] == "healthy" and twin.get("pair") == name, f"{name}: the twin must name it back"
    assert twin["source"] == loop["source"]
    shared = {t["name"] for t in loop["tools"]} & {t["name"] for t in twin["tools"]}
    assert shared, f"{name}: a near-miss uses the same tools"
    assert loop["expect"].get("first_intervention_by"), f"{name}: a loop says by which turn the guard steps in"


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.get("kind") == "healthy"))
def test_each_healthy_case_is_paired_and_forbids_any_intervention(name: str) -> None:
    healthy = CASES[name]
    assert CASES.get(healthy.get("pair", ""), {}).get("kind") == "loop", f"{name}: pair must name its loop"
    expect = healthy["expect"]
    assert expect.get("no_intervention") is True
    assert expect.get("output_contains"), f"{name}: a healthy run must also deliver its answer"
