"""LaTeX helpers: escaping any text so it prints as itself and never breaks the compile."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import require_binary
from loopwarden.report.write.latex import body_of, escape, format_number, strip_comments


def test_specials_are_escaped() -> None:
    assert escape("a_b & 50% #1 $x {y} ~ ^ \\") == (
        "a\\_b \\& 50\\% \\#1 \\$x \\{y\\} \\textasciitilde{} \\textasciicircum{} \\textbackslash{}"
    )
    assert escape("bell\x07 and nul\x00 gone\ttab kept") == "bell and nul gone\ttab kept"


def test_numbers_read_well() -> None:
    assert format_number(3.0) == "3"
    assert format_number(0.070381) == "0.07038"
    assert format_number(1234567.0) == "1234567"
    assert format_number(1.5e-7) == "1.500e-07"
    assert format_number(float("nan")) == "--"


def test_comments_and_body() -> None:
    tex = "\\documentclass{article}\n\\begin{document}\n50\\% kept % dropped\n\\end{document}"
    assert strip_comments(tex).count("dropped") == 0 and "50\\% kept" in strip_comments(tex)
    assert body_of(tex).strip() == "50\\% kept % dropped"


# Four texts a document, each escaped on its own and set as a paragraph of its own: 16 texts in
# 4 xelatex passes, where 12 texts took 12 (a pass is ~0.45 s of CPU, most of it TeX's start).
@settings(max_examples=4, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(max_codepoint=0x2FF, exclude_categories=("Cs",)), max_size=60),
        min_size=4,
        max_size=4,
    )
)
def test_any_escaped_text_compiles(tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> None:
    require_binary("xelatex")
    from loopwarden.report.plan import probe_toolchain
    from loopwarden.report.write.compile import check_compiles

    preamble = "\\documentclass{article}\n\\usepackage{fontspec}\n\\begin{document}\n"
    tex = preamble + "".join(f"{escape(text)}\n\n" for text in texts) + "\\end{document}\n"
    workdir: Path = tmp_path_factory.mktemp("esc")
    assert asyncio.run(check_compiles(tex, workdir, probe_toolchain())) is None
