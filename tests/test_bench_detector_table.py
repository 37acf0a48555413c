"""`bench/detector_table.py` (it writes the README's per-detector table) run as a user runs it,
on a small folder: one loop the guard catches, one healthy near-miss, and one collapse marked
healthy by mistake, which must show up as a false intervention."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "detector_table.py"
READ = {"name": "read_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}


def write(folder: Path, name: str, **fields: object) -> None:
    case = {"name": name, "input": "go", "tools": [READ], **fields}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(case), encoding="utf-8")


def test_the_table_counts_catches_turns_and_false_interventions(tmp_path: Path) -> None:
    write(tmp_path, "collapse", kind="loop", model={"repeat_forever": {"call": "read_file", "args": {"path": "a"}}})
    write(
        tmp_path,
        "two-reads",
        kind="healthy",
        model={"script": [{"call": "read_file", "args": {"path": "a"}}, {"call": "read_file", "args": {"path": "b"}}]},
        expect={"no_intervention": True},
    )
    write(
        tmp_path, "mislabelled", kind="healthy", model={"repeat_forever": {"call": "read_file", "args": {"path": "b"}}}
    )
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=True, timeout=120
    )
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("| `")}
    cells = [c.strip() for c in rows["`repeated_call`"].split("|")[2:6]]
    # caught: the collapse, first steered in turn 3 (its 3rd identical call); falsely: the mislabelled one
    assert cells == ["1", "3", "3", "1"]
    assert "1/1 loop cases stopped or steered; 1/2 healthy cases intervened on (mislabelled)" in done.stdout
    assert "- `mislabelled`: the guard stepped in on a healthy run" in done.stdout
