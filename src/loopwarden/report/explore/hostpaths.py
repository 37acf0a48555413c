"""Tool errors reach the model (and a hosted model's provider): they never carry the host's
absolute paths. The data folder becomes paths relative to it, the output folder `<output>`, and
any other absolute path is cut to its last component."""

from __future__ import annotations

import re
from pathlib import Path

_ABSOLUTE = re.compile(r"(?<![^\s'\"(=\[])/(?:[^\s'\"/:,;()\[\]]+/)+(?P<last>[^\s'\"/:,;()\[\]]*)")


def scrub_host_paths(text: str, *, root: Path, out_dir: Path | None = None) -> str:
    for path, shown in ((root, ""), (out_dir, "<output>/")):
        if path is not None:
            text = text.replace(f"{path}/", shown).replace(str(path), shown.rstrip("/") or ".")
    return _ABSOLUTE.sub(lambda m: f".../{m.group('last')}", text)
