"""Report templates: data files (`template.toml` + `report.tex.j2`) selected by name or path.

The TOML says which optional pipeline steps run and what the report must contain; the Jinja2
file is the LaTeX skeleton. Both the model-drafted and the offline report fill the same skeleton.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, Field, ValidationError

from ..errors import LoopwardenError

Lang = Literal["en", "zh"]
BUILTIN_DIR = Path(__file__).parent / "templates"
TEX_FILE = "report.tex.j2"
SPEC_FILE = "template.toml"


class TemplateError(LoopwardenError):
    """A template that does not exist or cannot be read."""


class Steps(BaseModel):
    figures: bool = True
    gap: bool = True
    reflect_rounds: int = Field(default=3, ge=0, le=10)
    compile: bool = True


class Requirements(BaseModel):
    min_figures: int = 0
    requires_data: bool = False


class SectionSpec(BaseModel):
    key: str
    title: dict[str, str]
    needs: list[str] = Field(default_factory=list)
    """What the section needs from the exploration: goal, files, methods, tables, findings, figures."""

    def title_in(self, lang: Lang) -> str:
        return self.title.get(lang) or self.title.get("en") or self.key.title()


class Template(BaseModel):
    name: str
    description: str = ""
    steps: Steps = Field(default_factory=Steps)
    requirements: Requirements = Field(default_factory=Requirements)
    sections: list[SectionSpec]
    directory: Path

    def render(self, doc: dict[str, Any]) -> str:
        environment = _environment(self.directory)
        return environment.get_template(TEX_FILE).render(doc=doc)


def builtin_names() -> list[str]:
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / SPEC_FILE).is_file())


def resolve_template_dir(name_or_path: str) -> Path:
    """A built-in name, a template directory, or the path of a template.toml."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_file() and candidate.name == SPEC_FILE:
        candidate = candidate.parent
    if candidate.is_dir() and (candidate / SPEC_FILE).is_file():
        return candidate
    builtin = BUILTIN_DIR / name_or_path
    if "/" not in name_or_path and (builtin / SPEC_FILE).is_file():
        return builtin
    known = ", ".join(builtin_names())
    raise TemplateError(
        f"template not found: {name_or_path!r} (built-in templates: {known}; or a directory with {SPEC_FILE})"
    )


def load_template(name_or_path: str) -> Template:
    directory = resolve_template_dir(name_or_path)
    if not (directory / TEX_FILE).is_file():
        raise TemplateError(f"template {name_or_path!r} has no {TEX_FILE}")
    try:
        data = tomllib.loads((directory / SPEC_FILE).read_text(encoding="utf-8"))
        return Template.model_validate({**data, "directory": directory})
    except (tomllib.TOMLDecodeError, ValidationError, UnicodeDecodeError) as error:
        first_line = str(error).splitlines()[0]
        raise TemplateError(f"template {name_or_path!r} is invalid: {first_line}") from None


def _environment(directory: Path) -> jinja2.Environment:
    # LaTeX is full of braces and percent signs; these delimiters never clash with it.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        block_start_string="<%",
        block_end_string="%>",
        variable_start_string="<<",
        variable_end_string=">>",
        comment_start_string="<#",
        comment_end_string="#>",
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
