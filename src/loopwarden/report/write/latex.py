"""Small LaTeX helpers shared by the writer, the validator and the renderers."""

from __future__ import annotations

import re

_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_SPECIAL_RE = re.compile(r"[\\&%$#_{}~^]")


_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def escape(text: object) -> str:
    """Plain text -> LaTeX text that prints the same characters. Control characters (which TeX
    refuses as invalid input) are dropped."""
    return _SPECIAL_RE.sub(lambda m: _SPECIALS[m.group(0)], _CONTROL_RE.sub("", str(text)))


def format_number(value: float) -> str:
    """A readable number for a table cell: 4 significant digits, no scientific notation for
    ordinary magnitudes."""
    if value != value:  # NaN
        return "--"
    if value == int(value) and abs(value) < 1e12:
        return str(int(value))
    magnitude = abs(value)
    if magnitude >= 1e6 or magnitude < 1e-3:
        return f"{value:.3e}"
    return f"{value:.4g}"


_COMMENT_RE = re.compile(r"(?<!\\)%.*$", re.MULTILINE)


def strip_comments(tex: str) -> str:
    return _COMMENT_RE.sub("", tex)


def body_of(tex: str) -> str:
    """The text between \\begin{document} and \\end{document} (all of it when absent)."""
    start = tex.find(r"\begin{document}")
    end = tex.rfind(r"\end{document}")
    if start == -1:
        return tex
    return tex[start + len(r"\begin{document}") : end if end != -1 else len(tex)]


_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def has_cjk(text: str) -> bool:
    return _CJK_RE.search(text) is not None


CJK_FONT_PREFERENCE = (
    "Noto Serif CJK SC",
    "Noto Sans CJK SC",
    "Source Han Serif SC",
    "AR PL UMing CN",
    "WenQuanYi Zen Hei",
)


def find_cjk_font() -> str | None:
    """A Chinese font fontconfig knows about (for xeCJK), or None."""
    import shutil
    import subprocess

    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return None
    try:
        listing = subprocess.run(
            [fc_list, ":lang=zh", "family"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    families = {name.strip() for line in listing.splitlines() for name in line.split(",")}
    for preferred in CJK_FONT_PREFERENCE:
        if preferred in families:
            return preferred
    return sorted(families)[0] if families else None
