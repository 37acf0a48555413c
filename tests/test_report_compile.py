"""Compiling with xelatex: the first error with its line comes from the log, a failed compile
never deletes or replaces the last good PDF, each pass has a timeout, and a bounded repair with
the model can fix a broken source."""

from __future__ import annotations

from pathlib import Path

from helpers import require_binary
from loopwarden.events import EventStamper, Totals
from loopwarden.models import ScriptedModel
from loopwarden.report.events import CompileError
from loopwarden.report.folder.scan import ScanResult
from loopwarden.report.plan import Toolchain, probe_toolchain
from loopwarden.report.templates import load_template
from loopwarden.report.write.compile import check_compiles, compile_tex, first_error
from loopwarden.report.write.draft import Session
from loopwarden.report.write.offline_writer import WriterInput
from loopwarden.report.write.writing import Writing, compile_report
from reportkit import make_record

GOOD = (
    "\\documentclass{article}\n\\begin{document}\nSoil temperature was measured.\n"
    "See \\cite{smith2024}.\n\\bibliographystyle{plain}\n\\bibliography{references}\n\\end{document}\n"
)
BIB = "@misc{smith2024,\n  title = {Soil sensor field protocol},\n  author = {Jane Smith},\n  year = {2024}\n}\n"
BROKEN = "\\documentclass{article}\n\\begin{document}\nFirst line.\n\\brokencommand{x}\n\\end{document}\n"

SAMPLE_LOG = """This is XeTeX, Version 3.141592653
(./report.tex
LaTeX2e <2023-11-01>
./report.tex:12: Undefined control sequence.
l.12 \\brokencommand
                   {x}
./report.tex:20: Missing $ inserted.
"""


def test_first_error_and_its_line_come_from_the_log() -> None:
    error = first_error(SAMPLE_LOG)
    assert error is not None
    assert (error.message, error.line) == ("Undefined control sequence.", 12)
    assert "\\brokencommand" in error.context
    assert "report.tex:12" in error.describe()


def test_first_error_reads_classic_bang_lines() -> None:
    error = first_error("! LaTeX Error: File `nothere.sty' not found.\n\nl.3 \\usepackage{nothere}\n")
    assert error is not None and error.line == 3 and "nothere.sty" in error.message
    assert first_error("no errors here\nOutput written on report.pdf") is None


async def test_good_compile_then_broken_source_keeps_the_good_pdf(tmp_path: Path) -> None:
    require_binary("xelatex")
    tools = probe_toolchain()
    tex = tmp_path / "report.tex"
    tex.write_text(GOOD)
    (tmp_path / "references.bib").write_text(BIB)
    result = await compile_tex(tex, tools)
    assert result.ok and result.pdf == tmp_path / "report.pdf"
    assert result.passes[:3] == ["xelatex", "bibtex", "xelatex"]
    good = (tmp_path / "report.pdf").read_bytes()
    assert good.startswith(b"%PDF")

    tex.write_text(BROKEN)
    failed = await compile_tex(tex, tools)
    assert not failed.ok and failed.error is not None
    assert failed.error.message == "Undefined control sequence." and failed.error.line == 4
    assert (tmp_path / "report.pdf").read_bytes() == good, "the last good PDF survives a failed compile"
    assert failed.log_path is not None and failed.log_path.is_file(), "the log is kept for the user"


async def test_each_pass_has_a_timeout(tmp_path: Path) -> None:
    require_binary("xelatex")
    tex = tmp_path / "report.tex"
    tex.write_text("\\documentclass{article}\n\\begin{document}\n\\def\\loop{\\loop}\\loop\n\\end{document}\n")
    # 1.5 s: the loop burns CPU until the wall-clock limit stops it (3 s cost 3 s of CPU); the CPU
    # rlimit is ceil(timeout) = 2 s, so the wall-clock limit is always the one that ends it.
    result = await compile_tex(tex, probe_toolchain(), timeout=1.5)
    assert not result.ok and result.error is not None and "timed out" in result.error.message
    assert not (tmp_path / "report.pdf").exists()


async def test_check_compiles_resolves_paths_from_the_output_folder(tmp_path: Path) -> None:
    require_binary("xelatex")
    tools = probe_toolchain()
    from reportkit import write_png

    write_png(tmp_path / "figures" / "temp.png")
    with_figure = GOOD.replace("Soil", "\\includegraphics[width=2cm]{figures/temp.png}\nSoil").replace(
        "\\documentclass{article}", "\\documentclass{article}\n\\usepackage{graphicx}"
    )
    assert await check_compiles(with_figure, tmp_path, tools) is None
    missing = with_figure.replace("temp.png", "absent.png")
    error = await check_compiles(missing, tmp_path, tools)
    assert error is not None and "absent.png" in error.message
    assert not (tmp_path / "_check").exists()


async def test_an_error_naming_a_file_under_a_long_path_is_reported_whole(tmp_path: Path) -> None:
    # TeX folds its log at 79 characters unless told otherwise: the file name was cut in two.
    require_binary("xelatex")
    workdir = tmp_path / ("a-long-folder-name-" * 5)
    workdir.mkdir()
    missing = GOOD.replace("Soil", "\\includegraphics{figures/absent-figure.png}\nSoil").replace(
        "\\documentclass{article}", "\\documentclass{article}\n\\usepackage{graphicx}"
    )
    error = await check_compiles(missing, workdir, probe_toolchain())
    assert error is not None and "figures/absent-figure.png" in error.message, error


def _writing(tmp_path: Path, model: ScriptedModel | None, tools: Toolchain) -> Writing:
    inp = WriterInput(load_template("brief"), make_record(), ScanResult(root=str(tmp_path)), [], [])
    session = Session(model or ScriptedModel([]), EventStamper("t"), Totals(), tools, tmp_path)
    return Writing(inp=inp, session=session, offline=model is None)


async def test_a_bounded_repair_with_the_model_fixes_a_broken_source(tmp_path: Path) -> None:
    require_binary("xelatex")
    fixed = BROKEN.replace("\\brokencommand{x}", "x")
    model = ScriptedModel([fixed], name="writer")
    w = _writing(tmp_path, model, probe_toolchain())
    w.tex = BROKEN
    (tmp_path / "report.tex").write_text(BROKEN)
    events = [e async for e in compile_report(w, timeout=60)]
    errors = [e for e in events if isinstance(e, CompileError)]
    assert len(errors) == 1 and errors[0].line == 4 and errors[0].will_repair
    assert "Undefined control sequence" in model.requests[0].messages[-1]["content"]
    assert "\\brokencommand" in model.requests[0].messages[-1]["content"], "the repair sees the failing line"
    assert w.pdf_ok and (tmp_path / "report.pdf").is_file()
    assert (tmp_path / "report.tex").read_text() == fixed


async def test_repair_is_bounded_and_the_old_pdf_stays(tmp_path: Path) -> None:
    require_binary("xelatex")
    tools = probe_toolchain()
    (tmp_path / "report.tex").write_text(GOOD.replace("See \\cite{smith2024}.\n", ""))
    assert (await compile_tex(tmp_path / "report.tex", tools)).ok
    good = (tmp_path / "report.pdf").read_bytes()
    model = ScriptedModel([BROKEN, BROKEN, BROKEN, BROKEN], name="writer")  # never fixes it
    w = _writing(tmp_path, model, tools)
    w.tex = BROKEN
    (tmp_path / "report.tex").write_text(BROKEN)
    events = [e async for e in compile_report(w, timeout=60)]
    errors = [e for e in events if isinstance(e, CompileError)]
    assert [e.attempt for e in errors] == [1]  # each repair was itself refused (it does not compile)
    assert all(e.kept_pdf for e in errors)
    assert model.calls <= 2, "at most MAX_REPAIRS repair requests"
    assert not w.pdf_ok and "compile_failed" in w.failures
    assert (tmp_path / "report.pdf").read_bytes() == good


async def test_offline_compile_error_is_reported_without_repair(tmp_path: Path) -> None:
    require_binary("xelatex")
    w = _writing(tmp_path, None, probe_toolchain())
    (tmp_path / "report.tex").write_text(BROKEN)
    events = [e async for e in compile_report(w, timeout=60)]
    errors = [e for e in events if isinstance(e, CompileError)]
    assert len(errors) == 1 and not errors[0].will_repair and not errors[0].kept_pdf
    assert "compile_failed" in w.failures


async def test_the_pdf_comes_from_xelatex_own_driver_and_a_failing_driver_keeps_the_good_pdf(tmp_path: Path) -> None:
    """Every pass writes XDV and xdvipdfmx beside xelatex makes the PDF once. Without a driver
    there, the last pass makes the PDF itself; a driver that fails is a clear error naming it,
    and the last good PDF stays."""
    xelatex = require_binary("xelatex")
    tex = tmp_path / "report.tex"
    tex.write_text(GOOD)
    (tmp_path / "references.bib").write_text(BIB)
    real = probe_toolchain()
    if Path(xelatex).with_name("xdvipdfmx").is_file():
        made = await compile_tex(tex, real)
        assert made.ok and made.passes[-1] == "xdvipdfmx"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "xelatex").symlink_to(Path(xelatex).resolve())
    alone = Toolchain(str(bin_dir / "xelatex"), real.bibtex, real.biber)  # no driver beside it
    result = await compile_tex(tex, alone)
    assert result.ok and "xdvipdfmx" not in result.passes
    good = (tmp_path / "report.pdf").read_bytes()
    assert good.startswith(b"%PDF")

    driver = bin_dir / "xdvipdfmx"
    driver.write_text("#!/bin/sh\necho 'xdvipdfmx:fatal: no font found' >&2\nexit 1\n")
    driver.chmod(0o755)
    failed = await compile_tex(tex, alone)
    assert not failed.ok and failed.error is not None and failed.error.pass_name == "xdvipdfmx"
    assert "no font found" in failed.error.message  # what the driver said reaches the user
    assert failed.passes[-1] == "xdvipdfmx"
    assert (tmp_path / "report.pdf").read_bytes() == good, "the last good PDF survives a failed driver"
