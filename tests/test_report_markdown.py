"""The Markdown rendering a reader without LaTeX gets: sections, lists, tables, figures, cites
and escapes come through as Markdown; text is never lost."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loopwarden.report.write.bib import Source
from loopwarden.report.write.latex import escape
from loopwarden.report.write.markdown import braced, latex_to_markdown

TEX = r"""\documentclass{article}
\usepackage{graphicx}
\title{Soil \& water scan}
\begin{document}
\maketitle
\begin{abstract}
We mapped soil\_temp\_c at 3 sites.
\end{abstract}
\section{Results}
The \textbf{mean} was 12.5 \emph{degrees} (50\% of max) as in \cite{smith2024}. % a comment
\begin{itemize}
  \item first finding
  \item second \texttt{field\_mT}
\end{itemize}
\begin{tabular}{lr}
\toprule
Column & Mean \\
\midrule
soil\_temp\_c & 12.5 \\
\bottomrule
\end{tabular}
\begin{figure}[H]
\centering
\includegraphics[width=0.8\linewidth]{figures/temp.png}
\caption{Soil temperature by site}
\end{figure}
\subsection{Notes}
Cost was \$5 and 100\# of {\small samples}.
\end{document}
"""


def test_constructs_become_markdown() -> None:
    source = Source(key="smith2024", path="protocol.md", title="Field protocol", authors=["Jane Smith"], year="2024")
    md = latex_to_markdown(TEX, [source])
    assert md.startswith("# Soil & water scan\n")
    assert "**Abstract.**" in md and "soil_temp_c at 3 sites" in md
    assert "## Results" in md and "### Notes" in md
    assert "**mean**" in md and "*degrees*" in md and "(50% of max)" in md
    assert "[smith2024]" in md and "a comment" not in md
    assert "- first finding" in md and "- second `field_mT`" in md
    assert "| Column | Mean |" in md and "| soil_temp_c | 12.5 |" in md
    assert "![Soil temperature by site](figures/temp.png)" in md
    assert "$5" in md and "100#" in md and "samples" in md
    assert "## References" in md and "Jane Smith" in md and "*Field protocol*" in md
    assert "\\" not in md, "no LaTeX commands are left"


def test_braced_groups_nest() -> None:
    text = r"\x{a{b}c}d"
    assert braced(text, 2) == ("a{b}c", 9)
    assert braced(text, 0) is None


PRINTABLE = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=40)


@given(PRINTABLE)
def test_escaped_text_comes_back_unchanged(text: str) -> None:
    tex = f"\\documentclass{{article}}\n\\begin{{document}}\n{escape(text)}\n\\end{{document}}\n"
    assert " ".join(latex_to_markdown(tex).split()) == " ".join(text.split())
