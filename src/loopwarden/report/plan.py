"""The pipeline's milestones, fixed before anything runs.

scan → explore → [figures] → [gap] → draft → reflect×N → bib → [compile]

The plan is computed from configuration alone (the template's switches and whether xelatex was
found, probed once per run), so a progress bar has its denominator from the first second. Every
milestone carries its stage name explicitly; a stage that turns out to have nothing to do is
reported as skipped, never dropped, so the last milestone is always index == total.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from .templates import Template

StageName = Literal["scan", "explore", "figures", "gap", "draft", "reflect", "bib", "compile"]


class Stage(BaseModel):
    index: int
    """1-based position in the plan."""
    name: StageName
    label: str
    """What a progress bar shows: "reflect 2/3", "compile (xelatex)"."""
    round: int | None = None


@dataclass(frozen=True)
class Toolchain:
    """The result of probing for the LaTeX tools, once per run; plan and compile share it."""

    xelatex: str | None
    bibtex: str | None
    biber: str | None

    @property
    def can_compile(self) -> bool:
        return self.xelatex is not None


def probe_toolchain(enabled: bool = True) -> Toolchain:
    if not enabled:
        return Toolchain(None, None, None)
    return Toolchain(shutil.which("xelatex"), shutil.which("bibtex"), shutil.which("biber"))


def plan_stages(template: Template, *, xelatex: bool) -> list[Stage]:
    steps = template.steps
    names: list[tuple[StageName, str, int | None]] = [("scan", "scan", None), ("explore", "explore", None)]
    if steps.figures:
        names.append(("figures", "figures", None))
    if steps.gap:
        names.append(("gap", "gap check", None))
    names.append(("draft", "draft", None))
    rounds = steps.reflect_rounds
    names += [("reflect", f"reflect {i}/{rounds}", i) for i in range(1, rounds + 1)]
    names.append(("bib", "bibliography", None))
    if steps.compile and xelatex:
        names.append(("compile", "compile (xelatex)", None))
    return [Stage(index=i, name=name, label=label, round=r) for i, (name, label, r) in enumerate(names, start=1)]
