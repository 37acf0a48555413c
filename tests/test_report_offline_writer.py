"""The offline writer fills the template from the record and computed facts, and says it was
written without a language model; the skeleton leaves each section to the model."""

from __future__ import annotations

from pathlib import Path

from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.templates import load_template
from loopwarden.report.write.bib import collect_sources
from loopwarden.report.write.gap import Gap
from loopwarden.report.write.offline_writer import WriterInput, offline_report, skeleton
from loopwarden.report.write.reflect import offline_review
from reportkit import make_folder, make_record


def _input(tmp_path: Path, template: str = "lab", **kw: object) -> WriterInput:
    data = make_folder(tmp_path)
    scan = scan_folder(data)
    record = kw.pop("record", None) or make_record(figure=tmp_path)
    gaps = [Gap(kind="requirement", message="assignment requirement not addressed: estimate the uncertainty")]
    return WriterInput(load_template(template), record, scan, gaps, collect_sources(data, scan), **kw)  # type: ignore[arg-type]


def test_offline_report_carries_the_facts(tmp_path: Path) -> None:
    inp = _input(tmp_path)
    tex = offline_report(inp)
    assert tex.startswith("\\documentclass") and tex.rstrip().endswith("\\end{document}")
    assert "Written without a language model" in tex
    for column in ("site\\_id", "soil\\_temp\\_c", "moisture\\_pct"):
        assert column in tex
    assert "\\includegraphics[width=0.85\\linewidth]{figures/temp.png}" in tex
    assert "\\caption{Soil temperature by site}" in tex
    assert "12.5" in tex and "13.1" in tex, "the statistics table is filled"
    assert "estimate the uncertainty" in tex, "gaps are stated explicitly"
    assert "\\cite{smith2024}" in tex, "documents in the folder are cited"
    for title in ("Introduction", "Materials and data", "Methods", "Results", "Discussion", "Conclusion"):
        assert f"\\section{{{title}}}" in tex
    assert offline_review(inp, tex).done


def test_brief_has_no_figures(tmp_path: Path) -> None:
    tex = offline_report(_input(tmp_path, "brief", figures_on=False))
    assert "includegraphics" not in tex and "\\section*{Findings}" in tex


def test_chinese_uses_xecjk_and_chinese_headings(tmp_path: Path) -> None:
    tex = offline_report(_input(tmp_path, lang="zh", cjk_font="Noto Serif CJK SC"))
    assert "\\usepackage{xeCJK}" in tex and "\\setCJKmainfont{Noto Serif CJK SC}" in tex
    assert "\\section{引言}" in tex and "本报告未使用语言模型" in tex


def test_skeleton_leaves_each_section_to_the_model(tmp_path: Path) -> None:
    inp = _input(tmp_path)
    tex = skeleton(inp)
    assert "Written without a language model" not in tex
    assert tex.count("% Write the ") == len(inp.template.sections)
    assert "12.5" not in tex


def test_special_characters_in_data_are_escaped(tmp_path: Path) -> None:
    record = make_record(findings=["100% of #samples cost $5 & more_{x}^2 ~ \\ok"])
    tex = offline_report(_input(tmp_path, record=record))
    assert (
        "100\\% of \\#samples cost \\$5 \\& more\\_\\{x\\}\\textasciicircum{}2 \\textasciitilde{} \\textbackslash{}ok"
        in tex
    )


def test_offline_review_finds_what_a_draft_lacks(tmp_path: Path) -> None:
    inp = _input(tmp_path)
    verdict = offline_review(inp, "\\documentclass{article}\\begin{document}\\section{Introduction}\\end{document}")
    assert not verdict.done
    assert any("missing section: Results" in issue for issue in verdict.major_issues)
    assert any("figure not included" in issue for issue in verdict.major_issues)
    assert any("finding not reported" in issue for issue in verdict.major_issues)
