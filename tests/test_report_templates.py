"""Templates are data files selected by name or path; a bad one is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.report.templates import TemplateError, builtin_names, load_template


def test_builtin_templates_load_by_name() -> None:
    assert {"lab", "brief"} <= set(builtin_names())
    lab, brief = load_template("lab"), load_template("brief")
    assert lab.steps.figures and lab.steps.gap and lab.steps.reflect_rounds == 3
    assert not brief.steps.figures and brief.steps.reflect_rounds == 0
    assert [s.key for s in lab.sections][:2] == ["introduction", "data"]


def test_template_by_directory_or_toml_path(tmp_path: Path) -> None:
    lab = load_template("lab")
    copy = tmp_path / "mine"
    copy.mkdir()
    for name in ("template.toml", "report.tex.j2"):
        (copy / name).write_text((lab.directory / name).read_text())
    assert load_template(str(copy)).name == "lab"
    assert load_template(str(copy / "template.toml")).directory == copy


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, "template not found"),
        ({"template.toml": 'name = "x"\nsections = []\n'}, "has no report.tex.j2"),
        ({"template.toml": "name = [", "report.tex.j2": ""}, "is invalid"),
        ({"template.toml": 'name = "x"\n[steps]\nreflect_rounds = -1\n', "report.tex.j2": ""}, "is invalid"),
    ],
)
def test_bad_templates_are_clear_errors(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    target = str(folder) if files else "no-such-template"
    with pytest.raises(TemplateError, match=expected):
        load_template(target)
