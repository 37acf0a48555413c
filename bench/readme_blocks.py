"""Generated blocks of README.md: the text between `<!-- bench:NAME:start -->` and
`<!-- bench:NAME:end -->` is replaced by what a command printed, never typed by hand."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- bench:{name}:start -->\n).*?(<!-- bench:{name}:end -->)", re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no <!-- bench:{name}:start/end --> markers")
    return pattern.sub(lambda m: m.group(1) + body.rstrip() + "\n" + m.group(2), text)


def write_blocks(blocks: dict[str, str], readme: Path = README) -> None:
    text = readme.read_text(encoding="utf-8")
    for name, body in blocks.items():
        text = replace_block(text, name, body)
    readme.write_text(text, encoding="utf-8")
    print(f"updated {readme}")
