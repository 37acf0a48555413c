"""A Markdown rendering of the LaTeX report, so a reader without LaTeX can read it.

Covers what reports use: sections, lists, tables (tabular/longtable), figures, emphasis, cites
and the usual escapes. Anything it does not know is unwrapped to its text, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .bib import Source
from .latex import body_of, strip_comments

_UNESCAPE = [
    (r"\textbackslash{}", "\\"),
    (r"\textasciitilde{}", "~"),
    (r"\textasciicircum{}", "^"),
    (r"\&", "&"),
    (r"\%", "%"),
    (r"\$", "$"),
    (r"\#", "#"),
    (r"\_", "_"),
    (r"\{", "{"),
    (r"\}", "}"),
]
_DROP_LINE = re.compile(
    r"^\s*\\(?:toprule|midrule|bottomrule|hline|endhead|endfirsthead|endfoot|endlastfoot|centering|maketitle|"
    r"tableofcontents|newpage|clearpage|bibliographystyle\{[^}]*\}|bibliography\{[^}]*\}|printbibliography|"
    r"addbibresource\{[^}]*\})\s*$",
    re.MULTILINE,
)
_SIMPLE_DROPS = re.compile(
    r"\\(?:small|footnotesize|large|Large|LARGE|noindent|centering|par|medskip|bigskip|smallskip)\b\s*"
)


def braced(text: str, start: int) -> tuple[str, int] | None:
    """The contents of the brace group opening at `start`, and the index after it."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for i in range(start, len(text)):
        char = text[i]
        if char == "\\":
            continue
        if char == "{" and (i == 0 or text[i - 1] != "\\"):
            depth += 1
        elif char == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def replace_command(text: str, name: str, render: Callable[[str], str]) -> str:
    pattern = re.compile(rf"\\{name}\*?(?:\[[^\]]*\])?\s*(?=\{{)")
    out, pos = [], 0
    for match in pattern.finditer(text):
        if match.start() < pos:
            continue
        group = braced(text, match.end())
        if group is None:
            continue
        out.append(text[pos : match.start()])
        out.append(render(group[0]))
        pos = group[1]
    out.append(text[pos:])
    return "".join(out)


def _captions(body: str) -> str:
    """Each \\caption{...} (braces balanced: escapes hold braces) as a CAPTION: row."""
    out, pos = [], 0
    while (at := body.find("\\caption{", pos)) != -1:
        group = braced(body, at + len("\\caption"))
        if group is None:
            break
        out += [body[pos:at], f"CAPTION:{group[0]}\\\\"]
        pos = group[1]
        rest = body[pos:].lstrip()
        if rest.startswith("\\\\"):
            pos = len(body) - len(rest) + 2
    return "".join(out) + body[pos:]


def _table(body: str) -> str:
    body = _captions(body)
    body = _DROP_LINE.sub("", body)
    rows, caption = [], None
    for raw in re.split(r"\\\\(?:\[[^\]]*\])?", body):
        row = raw.strip()
        if not row:
            continue
        if row.startswith("CAPTION:"):
            caption = row[len("CAPTION:") :]
            continue
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)&", row)])
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    head = f"*{caption}*\n\n" if caption else ""
    return "\n\n" + head + "\n".join(lines) + "\n\n"


def _environments(text: str) -> str:
    def table(match: re.Match[str]) -> str:
        return _table(match.group("body"))

    text = re.sub(
        r"\\begin\{(?:tabular|longtable|tabularx)\*?\}(?:\{[^}]*\})?\{(?:[^{}]|\{[^{}]*\})*\}(?P<body>.*?)\\end\{(?:tabular|longtable|tabularx)\*?\}",
        table,
        text,
        flags=re.DOTALL,
    )

    def figure(match: re.Match[str]) -> str:
        body = match.group("body")
        image = re.search(r"\\includegraphics(?:\[[^\]]*\])?\{([^}]*)\}", body)
        caption_at = body.find("\\caption")
        caption = braced(body, body.find("{", caption_at))[0] if caption_at != -1 else ""  # type: ignore[index]
        if image is None:
            return body
        return f"\n\n![{caption}]({image.group(1)})\n\n*{caption}*\n\n"

    text = re.sub(r"\\begin\{figure\*?\}(?:\[[^\]]*\])?(?P<body>.*?)\\end\{figure\*?\}", figure, text, flags=re.DOTALL)
    text = re.sub(r"\\begin\{abstract\}(.*?)\\end\{abstract\}", r"\n**Abstract.** \1\n", text, flags=re.DOTALL)
    text = re.sub(
        r"\\begin\{(?:itemize|enumerate|description)\}|\\end\{(?:itemize|enumerate|description)\}", "\n", text
    )
    text = re.sub(
        r"^\s*\\item(?:\[([^\]]*)\])?\s*",
        lambda m: f"- {m.group(1) + ': ' if m.group(1) else ''}",
        text,
        flags=re.MULTILINE,
    )
    return re.sub(r"\\(?:begin|end)\{[^}]*\}(?:\[[^\]]*\])?", "", text)


def latex_to_markdown(tex: str, sources: list[Source] | None = None) -> str:
    title = re.search(r"\\title\{([^}]*)\}", tex)
    text = strip_comments(body_of(tex))
    text = _environments(text)
    for level, name in ((2, "section"), (3, "subsection"), (4, "subsubsection"), (5, "paragraph")):
        text = replace_command(text, name, lambda s, level=level: f"\n\n{'#' * level} {s.strip()}\n\n")  # type: ignore[misc]
    for name, mark in (("textbf", "**"), ("emph", "*"), ("textit", "*"), ("texttt", "`")):
        text = replace_command(text, name, lambda s, mark=mark: f"{mark}{s}{mark}")  # type: ignore[misc]
    text = re.sub(
        r"[ ~]*\\cite[a-z]*\*?(?:\[[^\]]*\]){0,2}\{([^}]*)\}",
        lambda m: " [" + ", ".join(k.strip() for k in m.group(1).split(",")) + "]",
        text,
    )
    text = re.sub(r"\\parbox(?:\[[^\]]*\])?\{[^{}]*\}", "", text)  # the width, not the text
    text = re.sub(r"\\href\{[^{}]*\}", "", text)  # the target, not the text
    for name in ("fbox", "parbox", "url", "href", "mbox", "textsc", "underline", "Large", "Huge", "large"):
        text = replace_command(text, name, lambda s: s)
    text = _SIMPLE_DROPS.sub("", text)
    text = _DROP_LINE.sub("", text)
    text = text.replace("\\\\", "\n")
    held = {f"\x00{i}\x01": plain for i, (_, plain) in enumerate(_UNESCAPE)}
    for i, (escaped, _) in enumerate(_UNESCAPE):  # hold escapes aside while braces and commands go
        text = text.replace(escaped, f"\x00{i}\x01")
    text = text.replace("~", " ").replace("{", "").replace("}", "")
    text = re.sub(r"\\(?:[a-zA-Z]+)(?:\[[^\]]*\])?", "", text)
    for placeholder, plain in held.items():
        text = text.replace(placeholder, plain)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    heading = f"# {_plain(title.group(1))}\n\n" if title else ""
    references = _references(sources or [], tex)
    return heading + text + references + "\n"


def _plain(text: str) -> str:
    for escaped, plain in _UNESCAPE:
        text = text.replace(escaped, plain)
    return text


def _references(sources: list[Source], tex: str) -> str:
    cited = {
        k.strip()
        for m in re.finditer(r"\\cite[a-z]*\*?(?:\[[^\]]*\]){0,2}\{([^}]*)\}", tex)
        for k in m.group(1).split(",")
    }
    entries = [s for s in sources if s.key in cited]
    if not entries:
        return ""
    lines = []
    for s in entries:
        who = ", ".join(s.authors) + ". " if s.authors else ""
        doi = f" doi:{s.doi}" if s.doi else ""
        lines.append(f"- [{s.key}] {who}*{s.title}*{f' ({s.year})' if s.year else ''}. File `{s.path}`.{doi}")
    return "\n\n## References\n\n" + "\n".join(lines)
