"""A PDF in the folder describes it: its title and its abstract (the lines under "Abstract", up
to the first section or the keywords) — not its authors, date or introduction. PDFs made here by
xelatex from LaTeX a person would write (an article, a paper with "Abstract---" inline, a
handout with no abstract), read through the real reader (pypdf) and a real offline exploration."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import require_binary
from loopwarden.report.folder.paths import PathGuard
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.readers import FileReader
from loopwarden.report.readers.descriptions import describe
from loopwarden.report.record import Description
from loopwarden.report.write.bib import collect_sources
from reportkit import explore_offline

ABSTRACT = (
    "We measured volumetric soil moisture every hour at twelve probes under three cover crops over one growing "
    "season. The aim of this study is to compare how each crop dries the top soil. Moisture fell fastest under rye, "
    "by 4 percent per week in July."
)
ARTICLE = r"""\documentclass{article}
\title{Soil moisture under three cover crops}
\author{Jane Smith \and Ravi Patel}
\date{2024}
\begin{document}
\maketitle
\begin{abstract}
ABSTRACT_TEXT
\end{abstract}
\section{Introduction}
Cover crops change how water leaves the soil. This paragraph is the introduction and not the abstract.
\end{document}
""".replace("ABSTRACT_TEXT", ABSTRACT)
INLINE = r"""\documentclass{article}
\begin{document}
\begin{center}{\Large Drift of low-cost temperature loggers}\\[1em] A. Author\end{center}
\noindent\textbf{Abstract---}Twelve low-cost temperature loggers were kept in one climate chamber for
ninety days next to a reference thermometer. The goal was to estimate each logger's drift per
month. Drift ranged from 0.01 to 0.2 kelvin per month.

\noindent\textbf{Index Terms---}temperature, calibration, drift.
\section{Introduction}
Loggers drift.
\end{document}
"""
HANDOUT = r"""\documentclass{article}
\pagestyle{empty}
\begin{document}
\begin{center}\Large Hall probe calibration handout\end{center}
The Hall probe is calibrated against a reference coil before every session. Its
voltage is read at twenty currents from zero to two amperes, and the slope of the
line through the readings gives the probe's sensitivity.

Write down the room temperature at the start and the end of the session.
\end{document}
"""


def _pdf(folder: Path, name: str, source: str) -> Path:
    xelatex = require_binary("xelatex")
    work = folder.parent / f"{name}-build"
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{name}.tex").write_text(source)
    subprocess.run([xelatex, "-interaction=batchmode", f"{name}.tex"], cwd=work, capture_output=True, timeout=120)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.pdf"
    target.write_bytes((work / f"{name}.pdf").read_bytes())
    return target


def _described(folder: Path, name: str) -> Description | None:
    text = FileReader(PathGuard(folder)).read(name).text  # what the model and the record read
    return describe(name, text)


def test_an_articles_title_and_abstract(tmp_path: Path) -> None:
    _pdf(tmp_path / "data", "paper", ARTICLE)
    paper = _described(tmp_path / "data", "paper.pdf")
    assert paper is not None and paper.title == "Soil moisture under three cover crops"
    assert paper.summary == ABSTRACT, "the abstract, without title, authors, date or the introduction"
    assert paper.goal == "The aim of this study is to compare how each crop dries the top soil."


@pytest.mark.parametrize(
    ("name", "source", "title", "starts", "ends", "goal"),
    [
        ("loggers", INLINE, "Drift of low-cost temperature loggers",
         "Twelve low-cost temperature loggers were kept in one climate chamber",  # "cham-/ber" joined again
         "Drift ranged from 0.01 to 0.2 kelvin per month.",  # not the index terms below it
         "The goal was to estimate each logger\u2019s drift per month."),
        ("handout", HANDOUT, "Hall probe calibration handout",
         "The Hall probe is calibrated against a reference coil before every session.",
         "gives the probe\u2019s sensitivity.",  # one paragraph (no abstract), not the page
         None),
    ],
)  # fmt: skip
def test_an_inline_abstract_or_a_first_paragraph(
    tmp_path: Path, name: str, source: str, title: str, starts: str, ends: str, goal: str | None
) -> None:
    _pdf(tmp_path / "data", name, source)
    described = _described(tmp_path / "data", f"{name}.pdf")
    assert described is not None and described.title == title
    assert described.summary.startswith(starts) and described.summary.endswith(ends)
    assert described.goal == goal


def test_a_folder_described_by_a_pdf_is_written_from_its_abstract(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _pdf(data, "paper", ARTICLE)
    hours = np.arange(0, 48.0)
    pd.DataFrame({"hour": hours, "moisture_pct": 30 - 0.1 * hours}).to_csv(data / "probe_1.csv", index=False)
    record = explore_offline(data, tmp_path / "out")
    assert record.experiment == "Soil moisture under three cover crops"
    goal = "The aim of this study is to compare how each crop dries the top soil."
    assert record.goal == f"{goal} (as stated in paper.pdf)"
    [paper] = [d for d in record.descriptions if d.path == "paper.pdf"]
    assert paper.summary == ABSTRACT
    [source] = collect_sources(data, scan_folder(data))
    assert source.path == "paper.pdf" and source.title == "Soil moisture under three cover crops"
