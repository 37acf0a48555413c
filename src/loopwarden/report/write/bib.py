"""The bibliography, built only from sources that exist: documents in the data folder (titles,
authors, DOIs found in their text or metadata), .bib files in the folder, and the reference
report. Every `\\cite` key must resolve to one of them; an unresolved key is removed and
reported. Nothing is ever invented.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from ..folder.paths import real_name
from ..folder.scan import ScanResult
from ..readers.descriptions import describe
from ..readers.injection import find_injections
from .latex import escape

MAX_CHARS = 20_000
MAX_DOCUMENT_SOURCES = 200
"""Documents read for bibliographic data; a folder with more lists the rest uncited."""
DOI_RE = re.compile(r"\b10\.\d{4,9}/[^\s\"<>{}]+[^\s\"<>{}.,;)\]]")
YEAR_RE = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")
_DATE_LINE = re.compile(r"^\s*:?(?:date|year|published|copyright|©|日期|年份)\b", re.IGNORECASE)
CITE_RE = re.compile(
    r"~?\\(?P<cmd>cite|citep|citet|citealp|citealt|citeauthor|citeyear|parencite|textcite|autocite|footcite|nocite)"
    r"(?P<star>\*?)(?P<opts>(?:\[[^\]]*\]){0,2})\{(?P<keys>[^}]*)\}"
)
BIB_ENTRY_RE = re.compile(r"@(?P<type>\w+)\s*\{\s*(?P<key>[^,\s]+)\s*,", re.IGNORECASE)
_THEBIBLIOGRAPHY = re.compile(r"\\begin\{thebibliography\}.*?\\end\{thebibliography\}", re.DOTALL)
_BIB_DIRECTIVES = re.compile(
    r"^[ \t]*\\(?:bibliographystyle|bibliography|addbibresource|printbibliography)"
    r"(?:\[[^\]]*\])?(?:\{[^}]*\})?[ \t]*\n?",
    re.MULTILINE,
)


class Source(BaseModel):
    key: str
    path: str
    """Relative path in the data folder."""
    title: str
    authors: list[str] = Field(default_factory=list)
    year: str | None = None
    doi: str | None = None
    raw_bibtex: str | None = None
    """An entry taken verbatim from a .bib file in the folder."""
    note: str | None = None


class CitationCheck(BaseModel):
    tex: str
    cited: list[str]
    removed: list[str]
    removed_bibliography: bool = False
    """Whether an invented `thebibliography` block was stripped."""


def collect_sources(root: Path, scan: ScanResult, *, reference_report: str | None = None) -> list[Source]:
    sources: list[Source] = []
    taken: set[str] = set()
    for entry in scan.files:
        path = root / real_name(entry.path)
        if entry.ext == "bib":
            sources += _bib_file_sources(path, entry.path, taken)
        elif entry.kind == "documents" and len(sources) < MAX_DOCUMENT_SOURCES:
            source = _document_source(path, entry.path, entry.ext, taken)
            if source is not None:
                sources.append(source)
    if reference_report:
        for source in sources:
            if source.path == reference_report:
                source.note = "reference report"
    return sources


def _document_source(path: Path, rel: str, ext: str, taken: set[str]) -> Source | None:
    """A document is a source only with a real title (its metadata's, or a heading) and only
    when it does not address an AI assistant (that text is data, flagged elsewhere)."""
    try:
        text, meta = _read_document(path, ext)
    except Exception:  # unreadable: no title can be known, so it is not cited
        return None
    if find_injections(rel, text):
        return None
    title = meta.get("title") or _heading(rel, text)
    if not title:
        return None
    authors = [a.strip() for a in re.split(r";| and |,(?=\s*[A-Z][a-z]+\s)", meta.get("author", "")) if a.strip()]
    doi = DOI_RE.search(text[:MAX_CHARS])
    year = meta.get("year") or _year_near_top(text)
    key = _unique_key(_key_for(authors, year, rel), taken)
    return Source(
        key=key, path=rel, title=title.strip()[:300], authors=authors[:10], year=year, doi=doi.group(0) if doi else None
    )


def _read_document(path: Path, ext: str) -> tuple[str, dict[str, str]]:
    if ext == "pdf":
        from pypdf import PdfReader

        reader = PdfReader(str(path))
        info: dict[str, object] = dict(reader.metadata or {})
        meta = {k: str(info.get(f"/{k.title()}") or "") for k in ("title", "author")}
        created = YEAR_RE.search(str(info.get("/CreationDate") or ""))
        if created:
            meta["year"] = created.group(0)
        text = "\n".join((page.extract_text() or "") for page in reader.pages[:2])
        return text, {k: v for k, v in meta.items() if v}
    if ext == "docx":
        import docx

        document = docx.Document(str(path))
        props = document.core_properties
        text = "\n".join(p.text for p in document.paragraphs[:200])
        meta = {"title": props.title or "", "author": props.author or ""}
        return text, {k: v for k, v in meta.items() if v}
    text = path.read_text(encoding="utf-8", errors="replace")[:MAX_CHARS]
    meta = {}
    if ext == "tex":
        for field in ("title", "author"):
            found = re.search(rf"\\{field}\{{([^}}]*)\}}", text)
            if found:
                meta[field] = found.group(1).replace("\\and", ";")
    else:
        found = re.search(r"^\s*(?:authors?|作者)\s*[:：]\s*(.+)$", text, re.MULTILINE | re.IGNORECASE)
        if found:
            meta["author"] = found.group(1)
    return text, meta


def _heading(rel: str, text: str) -> str | None:
    """The document's own heading (Markdown, reStructuredText, \\title, a PDF's first heading)."""
    described = describe(rel, text)
    return described.title if described is not None else None


def _year_near_top(text: str) -> str | None:
    """The year a document states as its date ("Date: July, 1988", "Published 2024"), never
    any year its text mentions (a data range "from 2012 to 2015" is not a publication year)."""
    for line in text[:3000].splitlines():
        if _DATE_LINE.match(line):
            found = YEAR_RE.search(line)
            if found:
                return found.group(0)
    return None


def _key_for(authors: list[str], year: str | None, rel: str) -> str:
    if authors:
        surname = re.sub(r"[^a-z]", "", authors[0].split()[-1].lower()) if authors[0].split() else ""
        if surname:
            return f"{surname}{year or ''}"
    return re.sub(r"[^a-z0-9]+", "_", Path(rel).stem.lower()).strip("_") or "source"


def _unique_key(key: str, taken: set[str]) -> str:
    candidate, n = key, 1
    while candidate in taken:
        n += 1
        candidate = f"{key}_{n}"
    taken.add(candidate)
    return candidate


def _bib_file_sources(path: Path, rel: str, taken: set[str]) -> list[Source]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    sources = []
    starts = [
        m for m in BIB_ENTRY_RE.finditer(text) if m.group("type").lower() not in ("comment", "string", "preamble")
    ]
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        raw = text[match.start() : end].strip()
        key = match.group("key")
        if key in taken:
            continue
        taken.add(key)
        title = re.search(r"title\s*=\s*[{\"](.+?)[}\"]\s*,?\s*$", raw, re.MULTILINE | re.IGNORECASE)
        sources.append(Source(key=key, path=rel, title=title.group(1) if title else key, raw_bibtex=raw))
    return sources


# -- citations ----------------------------------------------------------------------------------


def check_citations(tex: str, known: set[str]) -> CitationCheck:
    """Drop every cite key that does not name a real source; drop a cite command left empty."""
    removed: list[str] = []
    cited: list[str] = []
    stripped = _THEBIBLIOGRAPHY.search(tex) is not None
    tex = _THEBIBLIOGRAPHY.sub("", tex)

    def fix(match: re.Match[str]) -> str:
        keys = [k.strip() for k in match.group("keys").split(",") if k.strip()]
        if match.group("cmd") == "nocite" and keys == ["*"]:
            return match.group(0)
        keep = [k for k in keys if k in known]
        removed.extend(k for k in keys if k not in known)
        cited.extend(k for k in keep if k not in cited)
        if not keep:
            return ""
        prefix = "~" if match.group(0).startswith("~") else ""
        cmd = f"\\{match.group('cmd')}{match.group('star')}{match.group('opts')}"
        return f"{prefix}{cmd}{{{','.join(keep)}}}"

    tex = CITE_RE.sub(fix, tex)
    return CitationCheck(tex=tex, cited=cited, removed=removed, removed_bibliography=stripped)


def with_bibliography(tex: str, has_citations: bool, *, style: str = "plainnat") -> str:
    """Point the document at references.bib when something is cited; remove the bibliography
    commands when nothing is (an empty bibliography is a LaTeX error)."""
    uses_biblatex = "\\usepackage{biblatex}" in tex or re.search(r"\\usepackage\[[^\]]*\]\{biblatex\}", tex)
    tex = _BIB_DIRECTIVES.sub("", tex)
    if not has_citations:
        return tex
    if uses_biblatex:
        tex = tex.replace("\\begin{document}", "\\addbibresource{references.bib}\n\\begin{document}", 1)
        directive = "\\printbibliography\n"
    else:
        directive = f"\\bibliographystyle{{{style}}}\n\\bibliography{{references}}\n"
    end = tex.rfind("\\end{document}")
    if end == -1:
        return tex + "\n" + directive
    return tex[:end] + directive + tex[end:]


def bibtex_entries(sources: list[Source], keys: list[str]) -> str:
    """references.bib: the entries for `keys`, in citation order."""
    by_key = {s.key: s for s in sources}
    return "\n\n".join(_entry(by_key[k]) for k in keys if k in by_key) + "\n"


def _entry(source: Source) -> str:
    if source.raw_bibtex:
        return source.raw_bibtex
    fields = {"title": f"{{{escape(source.title)}}}"}
    if source.authors:
        fields["author"] = " and ".join(escape(a) for a in source.authors)
    if source.year:
        fields["year"] = source.year
    if source.doi:
        fields["doi"] = escape(source.doi)
    fields["howpublished"] = f"File \\texttt{{{escape(source.path)}}} in the data folder"
    if source.note:
        fields["note"] = escape(source.note)
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields.items())
    return f"@misc{{{source.key},\n{body}\n}}"
