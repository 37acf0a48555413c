"""Model-written LaTeX is hostile input: TeX may read only the report's folder and the TeX
installation, write only its build folder, run nothing, and stop at CPU, time and output limits.
A draft that reaches for a secret gets a clear error naming the refused read, and the secret
never reaches the PDF (checked with pdftotext). Real xelatex, real OS isolation."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import require_binary
from loopwarden.models import ScriptedModel
from loopwarden.report.events import CompileError, DraftRejected
from loopwarden.report.plan import probe_toolchain
from loopwarden.report.sandbox.isolation import Isolation, probe_bwrap
from loopwarden.report.sandbox.texrun import TexLimits, run_tex, tex_isolation
from loopwarden.report.write.compile import compile_tex
from reportkit import collect, finished

SECRET = "TOPSECRET-4417"
DOC = "\\documentclass{article}\n\\begin{document}\nReport text. %s\n\\end{document}\n"


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """An output folder and a secret next to it (next to where the data folder would be)."""
    require_binary("xelatex")
    out = tmp_path / "out"
    out.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    return out, secret


async def compile_doc(out: Path, body: str) -> tuple[object, str]:
    (out / "report.tex").write_text(DOC % body)
    result = await compile_tex(out / "report.tex", probe_toolchain(), timeout=120)
    return result, pdf_text(out / "report.pdf")


def pdf_text(pdf: Path) -> str:
    if not pdf.exists():
        return ""
    pdftotext = require_binary("pdftotext")
    return subprocess.run([pdftotext, str(pdf), "-"], capture_output=True, check=True).stdout.decode()


@pytest.mark.parametrize("how", ["absolute", "relative", "include", "usepackage", "openin"])
async def test_reading_a_secret_is_refused_by_name(layout: tuple[Path, Path], how: str) -> None:
    out, secret = layout
    body = {
        "absolute": f"\\input{{{secret}}}",
        "relative": "\\input{../secret.txt}",
        "include": f"\\include{{{secret.with_suffix('')}}}",
        "usepackage": "",
        "openin": f"\\newread\\r\\openin\\r={secret} \\read\\r to\\x \\x",
    }[how]
    if how == "usepackage":
        (secret.parent / "evil.sty").write_text(SECRET + "\n")
        (out / "report.tex").write_text(
            DOC.replace("\\begin{document}", "\\usepackage{../evil}\n\\begin{document}") % ""
        )
        result = await compile_tex(out / "report.tex", probe_toolchain(), timeout=120)
        text = pdf_text(out / "report.pdf")
    else:
        result, text = await compile_doc(out, body)
    assert not result.ok and result.error is not None  # type: ignore[attr-defined]
    assert "TeX refused to read" in result.error.message  # type: ignore[attr-defined]
    assert "secret" in result.error.message or "evil" in result.error.message  # type: ignore[attr-defined]
    assert SECRET not in text


async def test_a_read_that_does_not_stop_tex_is_still_an_error(layout: tuple[Path, Path]) -> None:
    out, secret = layout
    result, text = await compile_doc(out, f"\\IfFileExists{{{secret}}}{{\\input{{{secret}}}}}{{absent}}")
    assert not result.ok and "TeX refused to read" in result.error.message  # type: ignore[attr-defined]
    assert SECRET not in text


async def test_a_link_out_of_the_folder_is_stopped_by_the_os_layer(layout: tuple[Path, Path]) -> None:
    """TeX's own policy allows a plain relative name; the OS isolation is what stops the read."""
    if not tex_isolation().isolated:
        pytest.skip("no OS isolation layer on this machine")
    out, secret = layout
    (out / "notes.txt").symlink_to(secret)
    result, text = await compile_doc(out, "\\input{notes.txt}")
    assert SECRET not in text
    assert not result.ok  # type: ignore[attr-defined]


async def test_writing_outside_and_shell_escape_do_nothing(layout: tuple[Path, Path]) -> None:
    out, secret = layout
    marker = secret.parent / "pwned"
    body = (
        "\\newwrite\\w\\immediate\\openout\\w=../written.tex \\immediate\\write\\w{x}\\immediate\\closeout\\w "
        f"\\immediate\\write18{{touch {marker}}}"
    )
    result, _ = await compile_doc(out, body)
    assert not (secret.parent / "written.tex").exists() and not marker.exists()
    assert not result.ok and "TeX refused to write" in result.error.message  # type: ignore[attr-defined]


async def test_endless_output_is_cut_off(layout: tuple[Path, Path]) -> None:
    out, _ = layout
    (out / "report.tex").write_text(DOC % "\\def\\spam{\\message{spam spam spam spam}\\spam}\\spam")
    build = out / "build"
    build.mkdir()
    xelatex = probe_toolchain().xelatex
    assert xelatex is not None
    run = await run_tex(
        [xelatex, "-interaction=nonstopmode", f"-output-directory={build}", "report.tex"],
        cwd=out,
        readable=[out],
        writable=build,
        timeout=120,
        limits=TexLimits(output_bytes=1 << 20),
    )
    assert run.limit == "output" and not run.timed_out


async def test_a_drafted_secret_read_is_refused_and_the_report_goes_on_without_it(tmp_path: Path) -> None:
    """The whole pipeline with a model that tries twice (absolute path, then the file next to the
    data folder) and then writes a clean draft: each try is rejected with the refused read named,
    and the final PDF has no trace of the secret."""
    require_binary("xelatex")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    clean = DOC % "The soil was warm."
    writer = ScriptedModel(
        [DOC % f"\\input{{{secret}}}", DOC % "\\input{../secret.txt}", clean, '{"done": true, "major_issues": []}'],
        name="writer",
    )
    events = await collect(tmp_path, writer=writer, toolchain=None, template="brief")
    rejected = [e for e in events if isinstance(e, DraftRejected)]
    assert [str(secret) in rejected[0].problem, "../secret.txt" in rejected[1].problem] == [True, True]
    assert all("TeX refused to read" in e.problem for e in rejected)
    assert not [e for e in events if isinstance(e, CompileError)]
    assert finished(events).status in ("completed", "degraded")
    text = pdf_text(tmp_path / "out" / "report.pdf")
    assert "The soil was warm." in text and SECRET not in text


async def test_under_bubblewrap_tex_still_makes_a_pdf_and_cannot_follow_a_link_out(layout: tuple[Path, Path]) -> None:
    """Where there is no Landlock, bubblewrap is the OS layer for TeX as for figures."""
    require_binary("bwrap")
    bwrap = probe_bwrap()
    if bwrap is None:
        pytest.skip("bwrap is installed but cannot create namespaces here")
    out, secret = layout
    (out / "notes.txt").symlink_to(secret)
    build = out / "build"
    build.mkdir()
    xelatex = probe_toolchain().xelatex
    assert xelatex is not None
    isolation = Isolation(landlock_abi=None, seccomp=tex_isolation().seccomp, bwrap=bwrap)
    for body, produced in (("Plain text.", True), ("\\input{notes.txt}", False)):
        (out / "report.tex").write_text(DOC % body)
        argv = [xelatex, "-interaction=nonstopmode", "-halt-on-error", f"-output-directory={build}", "report.tex"]
        run = await run_tex(argv, cwd=out, readable=[out], writable=build, timeout=120, isolation=isolation)
        assert (run.returncode == 0) is produced and run.layer.startswith("bwrap"), run.output[-500:]
        assert (build / "report.pdf").exists() is produced
        assert SECRET not in pdf_text(build / "report.pdf")
        (build / "report.pdf").unlink(missing_ok=True)


async def test_biber_works_inside_the_containment(tmp_path: Path) -> None:
    """biber (Perl) needs a temporary folder: it gets the build folder, nothing else."""
    require_binary("biber")
    (tmp_path / "report.tex").write_text(
        "\\documentclass{article}\n\\usepackage[backend=biber]{biblatex}\n\\addbibresource{references.bib}\n"
        "\\begin{document}\nSee \\cite{smith2024}.\n\\printbibliography\n\\end{document}\n"
    )
    (tmp_path / "references.bib").write_text(
        "@misc{smith2024,\n  title = {Soil sensor protocol},\n  author = {Jane Smith},\n  year = {2024}\n}\n"
    )
    result = await compile_tex(tmp_path / "report.tex", probe_toolchain(), timeout=120)
    assert result.ok and result.passes[:2] == ["xelatex", "biber"] and result.warnings == [], result.warnings
    assert "Jane Smith" in pdf_text(tmp_path / "report.pdf")
