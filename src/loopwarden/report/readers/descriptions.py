"""The folder's own words: what its description files (README, .rst, .md, .tex, a .py module's
docstring, a PDF's first page) say the data is — a title, a summary, a goal, units.

Only what a file states is taken: a title is a real heading (Markdown `#`, an underlined
reStructuredText heading, `\\title{}`, a docstring's first line, a PDF's title), never the first
line of an arbitrary file; a summary is the first paragraph of prose, not a field list or table.
"""

from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath

from ..record import Description
from .injection import find_injections

DESCRIPTION_EXTS = frozenset({"md", "markdown", "rst", "txt", "tex", "py", "pdf", "docx", "org"})
MAX_SUMMARY = 900
GOAL_WORDS = (
    "goal", "aim", "objective", "purpose", "designed to", "in order to", "we measure", "this study",
    "to investigate", "to measure", "to study", "to predict", "to classify", "is used to", "was used to",
)  # fmt: skip
_RST_RULE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_TEX_TITLE = re.compile(r"\\title\{([^}]+)\}")
_PAGE_MARK = re.compile(r"^--- page \d+ of \d+ ---$")
_CLOSING = re.compile(r"^\[(?:truncated|offset) .*\]$")
UNIT_PATTERN = re.compile(
    r"(?P<quantity>[A-Za-z][A-Za-z ()/_-]{1,60}?)\s*(?:\bin\b|\(|\[)\s*"
    r"(?P<unit>cm|mm|m|km|kg|g|mg|ml|l|s|ms|min|h|hours|days|years|°C|°F|K|ppm|ppb|Pa|hPa|kPa|mbar|V|mV|A|mA|W|"
    r"kW|Hz|kHz|MHz|T|mT|%|percent|degrees|inches|feet|mph|knots|m/s|km/h|dB|μm|um|nm)\b(?:\)|\])?",
)


def describe(path: str, text: str) -> Description | None:
    """What a description file says; None when it is not one (no heading and no prose)
    or when it addresses an AI assistant (it is then flagged, never used)."""
    ext = PurePosixPath(path).suffix.lower().lstrip(".")
    if ext not in DESCRIPTION_EXTS or find_injections(path, text):
        return None
    lines = [line for line in text.splitlines() if not _PAGE_MARK.match(line.strip()) and not _CLOSING.match(line)]
    if ext == "py":
        return _docstring(path, "\n".join(lines))
    title = _title(lines, ext)
    body = _pdf_paragraphs(lines, title) if ext == "pdf" else _paragraphs(lines, ext)
    summary = _clip(next((p for p in body if _is_prose(p)), ""))
    readme = PurePosixPath(path).stem.lower() in ("readme", "description", "about", "descr")
    if title is None and not (summary and readme):
        return None
    goal = _goal([s for p in body if _is_prose(p) for s in _sentences(p)])
    return Description(
        path=path, title=title, summary=summary, goal=goal, units=_units("\n".join(lines)), readme=readme
    )


def first_sentence(text: str) -> str:
    sentences = _sentences(text)
    return sentences[0] if sentences else text


def main_description(descriptions: list[Description]) -> Description | None:
    """The one that speaks for the folder: a README nearest the top, else a titled file nearest the top."""
    ranked = sorted(descriptions, key=lambda d: (not d.readme, d.path.count("/"), d.title is None, d.path))
    return ranked[0] if ranked else None


def folder_title(descriptions: list[Description]) -> str | None:
    """The folder's title in its own words: the heading of a README that speaks for all of it
    (no description outside its folder), or the headings of the files that describe its parts."""
    main = main_description(descriptions)
    if main is not None and main.readme and main.title:
        home = main.path.rpartition("/")[0]
        if not home or all(d.path.startswith(home + "/") for d in descriptions):
            return main.title
    titles = list(dict.fromkeys(d.title for d in descriptions if d.title))
    if not titles:
        return None
    return titles[0] if len(titles) == 1 else "; ".join(titles[:3]) + (" and others" if len(titles) > 3 else "")


def matching_description(table_path: str, descriptions: list[Description]) -> Description | None:
    """The file that describes one table: same name stem (iris.csv <- iris.rst), else none."""
    stem = _stem(table_path)
    return next((d for d in descriptions if _stem(d.path) == stem and not d.readme), None)


def _stem(path: str) -> str:
    name = PurePosixPath(path.split("#")[0]).stem.lower()
    return re.sub(r"(_data|_dataset|-data)$", "", name)


def _docstring(path: str, source: str) -> Description | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    # The module's docstring, else the first function's or class's (a loader that says what it loads).
    doc = ast.get_docstring(tree) or next(
        (
            d
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and (d := ast.get_docstring(node))
        ),
        None,
    )
    if not doc or not doc.strip():
        return None
    first, _, rest = doc.strip().partition("\n")
    paragraphs = _paragraphs(rest.splitlines(), "md")
    summary = _clip(next((p for p in paragraphs if _is_prose(p)), ""))
    goal = _goal([s for p in [first, *paragraphs] for s in _sentences(p)])
    return Description(path=path, title=first.strip().rstrip("."), summary=summary, goal=goal, units=_units(doc))


def _title(lines: list[str], ext: str) -> str | None:
    if ext == "tex":
        found = _TEX_TITLE.search("\n".join(lines))
        return found.group(1).strip() if found else None
    for i, line in enumerate(lines[:80]):
        stripped = line.strip()
        if ext in ("md", "markdown", "txt", "org"):
            heading = _MD_HEADING.match(line) or (re.match(r"^\*+\s+(.+)$", line) if ext == "org" else None)
            if heading:
                return heading.group(1).strip()
        # An underlined heading (reStructuredText, and Markdown's setext form).
        if stripped and not _RST_RULE.match(stripped) and i + 1 < len(lines):
            rule = lines[i + 1].strip()
            if _RST_RULE.match(rule) and len(rule) >= len(stripped) and not stripped.startswith(".."):
                return stripped
    if ext == "pdf":  # a PDF's first heading: the first short line of its first page
        for line in lines[:10]:
            stripped = line.strip()
            if 2 <= len(stripped.split()) <= 20 and not stripped.endswith((".", ",", ";")):
                return stripped
    return None


_ABSTRACT = re.compile(r"^\s*(?:abstract|summary)\b\s*[.:\u2014\u2013-]?\s*(.*)$", re.IGNORECASE)
_PDF_STOP = re.compile(
    r"^\s*(?:(?:\d+(?:\.\d+)*\.?|[IVX]+\.)\s+[A-Z][^.]{0,80}$|(?:keywords|key words|index terms|introduction|"
    r"contents|acknowledg\w*)\b)",
    re.IGNORECASE,
)


def _pdf_paragraphs(lines: list[str], title: str | None) -> list[str]:
    """A PDF's text has no blank lines between paragraphs: its abstract (the lines under an
    "Abstract" heading, up to the first section heading or keywords) is its summary; without
    one, the first block of prose after the title lines, up to a short line ending a sentence."""
    page = [line.strip() for line in lines[:150]]
    start = next((i for i, line in enumerate(page) if _ABSTRACT.match(line)), None)
    if start is not None:
        first = _ABSTRACT.match(page[start])
        taken = [first.group(1)] if first and first.group(1) else []
        for line in page[start + 1 :]:
            if not line or _PDF_STOP.match(line):
                break
            taken.append(line)
        return [_join_lines(taken)] if taken else []
    body = [line for line in page if line and line != title]
    begin = next((i for i, line in enumerate(body) if len(line.split()) >= 8), None)
    if begin is None:
        return []
    widths = sorted(len(line) for line in body[begin:])
    full = widths[(len(widths) * 9) // 10]  # a full line's width (justified or ragged)
    taken = []
    for line in body[begin:]:
        if _PDF_STOP.match(line):
            break
        taken.append(line)
        if line.endswith((".", "!", "?")) and len(line) < 0.85 * full:
            break  # a short last line: the paragraph ends here
    return [_join_lines(taken)]


def _join_lines(lines: list[str]) -> str:
    """Lines of a PDF paragraph as one text, words hyphenated at a line end joined again."""
    text = ""
    for line in lines:
        hyphenated = text.endswith("-") and line[:1].islower()
        text = text[:-1] + line if hyphenated else f"{text} {line}".strip()
    return text


def _paragraphs(lines: list[str], ext: str) -> list[str]:
    """Blocks of text separated by blank lines, headings and rules removed."""
    out: list[str] = []
    current: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        next_is_rule = i + 1 < len(lines) and bool(_RST_RULE.match(lines[i + 1].strip()))
        if not stripped or _RST_RULE.match(stripped) or _MD_HEADING.match(line) or next_is_rule:
            if current:
                out.append(" ".join(current))
            current = []
            continue
        if line[:1].isspace() and ext == "rst" and not current:
            continue  # an indented block (a directive's body, a field's list) is not prose
        current.append(stripped)
    if current:
        out.append(" ".join(current))
    return out


def _is_prose(paragraph: str) -> bool:
    """Sentences, not a field list, table, directive, list or code."""
    if paragraph.startswith((":", "..", "**", "-", "*", "|", "+", "=", "\\", "%", ">", "```", "[")):
        return False
    words = paragraph.split()
    return len(words) >= 8 and "." in paragraph and sum(w.isalpha() for w in words) >= len(words) / 2


def _sentences(paragraph: str) -> list[str]:
    """Split after . ! ? followed by a capital, not after an initial or abbreviation ("R.A. Fisher")."""
    parts = re.split(r"(?<=[a-z0-9)\]][.!?])\s+(?=[A-Z])", paragraph)
    return [s.strip() for s in parts if s.strip()]


def _goal(sentences: list[str]) -> str | None:
    """The sentence that says what the data is for: one naming an aim, goal, objective or
    purpose first, else one saying what was measured or studied."""
    said = [s for s in sentences if _says_goal(s)]
    strong = [s for s in said if re.search(r"\b(?:aims?|goals?|objectives?|purpose)\b", s, re.IGNORECASE)]
    chosen = strong or said
    return chosen[0] if chosen else None


def _says_goal(sentence: str) -> bool:
    lowered = f" {sentence.lower()}"
    return len(sentence) > 15 and any(f" {w}" in lowered for w in GOAL_WORDS)


def _units(text: str) -> dict[str, str]:
    units: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip().lstrip("-*: ").strip()
        if len(stripped) > 80:
            continue  # a unit is stated on a short line (an attribute list), not inside prose
        match = UNIT_PATTERN.fullmatch(stripped.rstrip(".,;"))
        if match:
            units.setdefault(" ".join(match.group("quantity").strip(" ([").split()), match.group("unit"))
    return units


def _clip(text: str) -> str:
    if len(text) <= MAX_SUMMARY:
        return text
    cut = text[:MAX_SUMMARY]
    end = cut.rfind(". ")
    return cut[: end + 1] if end > MAX_SUMMARY // 3 else cut.rstrip() + " ..."
