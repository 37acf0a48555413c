"""The bibliography comes only from sources that exist in the folder; every cite key must
resolve, an unresolved one is removed and reported, nothing is invented."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from loopwarden.models import ScriptedModel
from loopwarden.report.events import CitationsRemoved
from loopwarden.report.folder.scan import scan_folder
from loopwarden.report.write.bib import bibtex_entries, check_citations, collect_sources, with_bibliography
from reportkit import collect, finished, make_folder

REVIEW_DONE = '{"major_issues": [], "minor_issues": [], "done": true}'


def _tex(body: str) -> str:
    return f"\\documentclass{{article}}\n\\begin{{document}}\n{body}\n\\end{{document}}\n"


def _folder_with_sources(tmp_path: Path) -> Path:
    data = make_folder(tmp_path)
    (data / "refs.bib").write_text(
        "@article{doe2019,\n  title = {Soil moisture sensing},\n  author = {Doe, John},\n  year = {2019}\n}\n"
    )
    from docx import Document

    document = Document()
    document.core_properties.title = "Lab handout: soil temperature"
    document.core_properties.author = "Ada Lovelace"
    document.add_paragraph("Measure the soil temperature at every site.")
    document.save(str(data / "handout.docx"))
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    writer.add_metadata({"/Title": "Calibration of soil probes", "/Author": "Grace Hopper"})
    with (data / "calibration.pdf").open("wb") as handle:
        writer.write(handle)
    return data


def test_sources_are_read_from_the_documents_in_the_folder(tmp_path: Path) -> None:
    data = _folder_with_sources(tmp_path)
    sources = {s.key: s for s in collect_sources(data, scan_folder(data))}
    assert sources["smith2024"].title == "Soil sensor field protocol"
    assert sources["smith2024"].doi == "10.1234/soil.2024.001"
    assert sources["smith2024"].authors == ["Jane Smith"]
    assert sources["doe2019"].raw_bibtex is not None and sources["doe2019"].path == "refs.bib"
    handout = next(s for s in sources.values() if s.path == "handout.docx")
    assert handout.title == "Lab handout: soil temperature" and handout.authors == ["Ada Lovelace"]
    pdf = next(s for s in sources.values() if s.path == "calibration.pdf")
    assert pdf.title == "Calibration of soil probes" and pdf.authors == ["Grace Hopper"]


def test_unknown_keys_are_removed_known_kept() -> None:
    tex = _tex("As shown \\cite{real,fake2020} and~\\citep[p.~3]{ghost}. See \\citet{real}.")
    check = check_citations(tex, {"real"})
    assert check.removed == ["fake2020", "ghost"]
    assert "\\cite{real}" in check.tex and "ghost" not in check.tex and "fake2020" not in check.tex
    assert "\\citep" not in check.tex, "a cite left with no key is removed entirely"
    assert check.cited == ["real"]


def test_a_hand_written_bibliography_is_stripped() -> None:
    tex = _tex(
        "Text \\cite{made_up}.\n\\begin{thebibliography}{9}\\bibitem{made_up} A. Nobody. Fiction.\\end{thebibliography}"
    )
    check = check_citations(tex, set())
    assert check.removed_bibliography and "thebibliography" not in check.tex and "made_up" not in check.tex


def test_bibliography_commands_follow_what_is_cited() -> None:
    tex = _tex("Text.\n\\bibliographystyle{plain}\n\\bibliography{mine}")
    assert "\\bibliography" not in with_bibliography(tex, has_citations=False)
    cited = with_bibliography(tex, has_citations=True)
    assert cited.count("\\bibliography{references}") == 1 and "mine" not in cited
    assert cited.index("\\bibliography{references}") < cited.index("\\end{document}")


def test_bibtex_entries_only_for_cited_keys(tmp_path: Path) -> None:
    data = _folder_with_sources(tmp_path)
    sources = collect_sources(data, scan_folder(data))
    bib = bibtex_entries(sources, ["smith2024"])
    assert "@misc{smith2024," in bib and "doe2019" not in bib
    assert "doi = {10.1234/soil.2024.001}" in bib and "protocol.md" in bib


KEY = st.text(alphabet="abcdefgh0123456789_", min_size=1, max_size=8)


@given(cited=st.lists(st.lists(KEY, min_size=1, max_size=4), min_size=1, max_size=6), known=st.sets(KEY, max_size=6))
def test_every_remaining_cite_resolves(cited: list[list[str]], known: set[str]) -> None:
    body = " ".join(f"Claim \\cite{{{','.join(keys)}}}." for keys in cited)
    check = check_citations(_tex(body), known)
    remaining = [k for m in re.finditer(r"\\cite\{([^}]*)\}", check.tex) for k in m.group(1).split(",")]
    assert set(remaining) <= known
    assert sorted(check.removed) == sorted(k for keys in cited for k in keys if k not in known)
    assert sorted(remaining) == sorted(k for keys in cited for k in keys if k in known)


async def test_a_draft_citing_a_key_not_in_the_folder_loses_that_cite(tmp_path: Path) -> None:
    make_folder(tmp_path)
    draft = _tex("Protocol as in \\cite{smith2024}; the method of \\cite{einstein1905} was used.")
    writer = ScriptedModel([draft, REVIEW_DONE], name="writer")
    events = await collect(tmp_path, writer=writer)
    removed = [e for e in events if isinstance(e, CitationsRemoved)]
    assert len(removed) == 1
    assert removed[0].keys == ["einstein1905"] and "einstein1905" in removed[0].message
    tex = (tmp_path / "out" / "report.tex").read_text()
    assert "einstein1905" not in tex and "\\cite{smith2024}" in tex
    bib = (tmp_path / "out" / "references.bib").read_text()
    assert "smith2024" in bib and "einstein1905" not in bib
    assert finished(events).status == "completed"
