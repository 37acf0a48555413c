"""End to end with real xelatex: the README's main command on the example folder produces a PDF
whose text carries the data's real column names and the figure captions; a broken .tex yields
the log's first error and the earlier good PDF survives; a Chinese report compiles with xeCJK."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import require_binary
from loopwarden.report.plan import probe_toolchain
from loopwarden.report.write.compile import compile_tex
from loopwarden.report.write.latex import find_cjk_font
from reportkit import collect, finished, make_folder, make_record

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "field-scan"


def readme_report_command() -> list[str]:
    """The `loopwarden report ...` part of the README's quick-start command."""
    for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines():
        if "loopwarden report" in line and not line.lstrip().startswith("#"):
            words = shlex.split(line.split("&&")[-1])
            return words[words.index("report") - 0 :]
    raise AssertionError("the README has no `loopwarden report` command")


def _plain(text: str) -> str:
    text = re.sub(r"-\n(?=\w)", "", text)  # undo hyphenation at line ends
    return " ".join(text.split())


def _pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def user_cache() -> str:
    return os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")


@pytest.fixture(scope="module")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    require_binary("xelatex")
    out = tmp_path_factory.mktemp("readme") / "out"
    args = readme_report_command()
    assert args[:2] == ["report", "examples/field-scan"], args
    args[args.index("--out") + 1] = str(out)
    done = subprocess.run(
        [sys.executable, "-c", "from loopwarden.cli import main; main()", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        # A fresh HOME: no endpoint configured, so offline. The cache folder stays the one the suite
        # warms: from a fresh one matplotlib rebuilds its font list (~2 s of CPU) and the screenshot
        # is read by OCR again (~3 s), neither of which this test is about.
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(out.parent), "XDG_CACHE_HOME": user_cache()},
    )
    return out, done


def test_readme_command_produces_a_pdf_with_real_columns_and_captions(example_run) -> None:
    require_binary("pdftotext")
    out, done = example_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / "report.pdf").read_bytes().startswith(b"%PDF")
    text = _plain(_pdf_text(out / "report.pdf"))
    columns = set()
    for table in sorted((EXAMPLE / "data").glob("*.csv")):
        rows = [line for line in table.read_text().splitlines() if line.strip() and not line.startswith("#")]
        columns |= set(next(csv.reader(rows)))
    assert columns, "the example has tables"
    for column in columns:
        assert column in text, f"column {column!r} is not in the PDF"
    record = json.loads((out / "exploration.json").read_text())
    captions = [figure["caption"] for figure in record["figures"]]
    assert captions, "exploration made figures"
    for caption in captions:
        assert _plain(caption) in text, f"caption {caption!r} is not in the PDF"
    assert "Written without a language model" in text
    for name in ("report.tex", "report.md", "events.jsonl", "exploration.json"):
        assert (out / name).is_file(), name
    assert "report completed" in done.stdout


def test_broken_tex_gives_the_log_error_and_keeps_the_good_pdf(example_run) -> None:
    out, done = example_run
    assert done.returncode == 0
    good = (out / "report.pdf").read_bytes()
    tex = (out / "report.tex").read_text()
    lines = tex.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("\\section")) + 1
    lines.insert(at, "\\thiscommanddoesnotexist")
    (out / "report.tex").write_text("\n".join(lines) + "\n")
    result = asyncio.run(compile_tex(out / "report.tex", probe_toolchain(), timeout=120))
    assert not result.ok and result.error is not None
    assert result.error.message == "Undefined control sequence."
    assert result.error.line == at + 1, "the line the log names is the line we broke"
    assert (out / "report.pdf").read_bytes() == good


async def test_chinese_report_compiles_with_xecjk(tmp_path: Path) -> None:
    require_binary("xelatex")
    require_binary("pdftotext")
    if find_cjk_font() is None:  # like require_binary: skip locally, fail where CI installs the fonts
        message = "no CJK font installed (install fonts-noto-cjk)"
        pytest.fail(message) if os.environ.get("CI", "").lower() == "true" else pytest.skip(message)
    make_folder(tmp_path)
    record = make_record(findings=["土壤温度在 11.9 到 13.1 摄氏度之间"])
    events = await collect(tmp_path, template="brief", lang="zh", record=record, toolchain=probe_toolchain())
    assert finished(events).status == "completed", finished(events).message
    tex = (tmp_path / "out" / "report.tex").read_text()
    assert "\\usepackage{xeCJK}" in tex
    text = _plain(_pdf_text(tmp_path / "out" / "report.pdf"))
    assert "摘要" in text and "发现" in text and "土壤温度在 11.9 到 13.1 摄氏度之间" in text
