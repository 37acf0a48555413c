"""Compiling the report with xelatex: twice, with the bibliography tool between, then xdvipdfmx
once on the last pass's output, each pass under
a timeout, in a private build folder, contained (sandbox/texrun.py: TeX reads only the report's
folder and the TeX installation, writes only the build folder; a refused open is a clear error).
The PDF is moved into place only when a compile succeeds,
so a failed compile never deletes (or overwrites) the last good PDF.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..plan import Toolchain
from ..sandbox.texrun import run_tex

JOB = "report"
BUILD_DIR = ".build"
CHECK_DIR = "_check"
"""The draft check's scratch folder; not a dot folder, since TeX's paranoid policy (openin_any=p)
refuses to read a main file inside one."""
_ERROR_LINE = re.compile(r"^! (?P<message>.*)$", re.MULTILINE)
_LINE_NO = re.compile(r"^l\.(?P<line>\d+) ?(?P<context>.*)$", re.MULTILINE)
_FILE_ERROR = re.compile(r"^(?P<file>[^\s:]+):(?P<line>\d+): (?P<message>.*)$", re.MULTILINE)


@dataclass
class LatexError:
    message: str
    line: int | None = None
    context: str = ""
    pass_name: str = "xelatex"
    file: str | None = None

    def describe(self) -> str:
        name = Path(self.file).name if self.file else None
        where = f" at {name or 'line'}{':' if name else ' '}{self.line}" if self.line is not None else ""
        return f"{self.pass_name}: {self.message}{where}" + (
            f" ({self.context.strip()})" if self.context.strip() else ""
        )


@dataclass
class CompileResult:
    ok: bool
    pdf: Path | None = None
    error: LatexError | None = None
    passes: list[str] = field(default_factory=list)
    log_path: Path | None = None
    warnings: list[str] = field(default_factory=list)


def first_error(log: str) -> LatexError | None:
    """The first error in a TeX log, with the source line it names."""
    file_line = _FILE_ERROR.search(log)
    bang = _ERROR_LINE.search(log)
    if bang is None and file_line is None:
        return None
    if bang is not None and (file_line is None or bang.start() <= file_line.start()):
        message = bang.group("message").strip()
        after = log[bang.end() :]
        line = _LINE_NO.search(after)
        if line is not None:
            return LatexError(message, int(line.group("line")), line.group("context"))
        return LatexError(message)
    assert file_line is not None
    context = _LINE_NO.search(log, file_line.end())
    return LatexError(
        file_line.group("message").strip(),
        int(file_line.group("line")),
        context.group("context") if context else "",
        file=file_line.group("file"),
    )


async def _run(
    argv: list[str], cwd: Path, timeout: float, *, readable: Path, writable: Path, env: dict[str, str] | None = None
) -> tuple[int, str, list[str]]:
    """(exit code or -1 on a timeout or limit, output, what TeX refused to open)."""
    run = await run_tex(argv, cwd=cwd, readable=[readable], writable=writable, timeout=timeout, env=env)
    refused = [f"read {p}" for p in run.refused_reads] + [f"write {p}" for p in run.refused_writes]
    if run.timed_out:
        return -1, f"timed out after {timeout:.0f}s", refused
    if run.limit is not None:
        return -1, "wrote more output than allowed and was stopped (output limit)", refused
    return run.returncode, run.output, refused


def refused_error(refused: list[str]) -> LatexError:
    """A clear error for a document that tried to open files outside its folder."""
    message = (
        f"TeX refused to {'; '.join(refused)}: a report may read only files in its own folder and the TeX "
        "installation, and write only its build folder (remove that \\input, \\include or \\openout)"
    )
    return LatexError(message)


async def _xelatex(
    tools: Toolchain, tex_dir: Path, build: Path, timeout: float, *, no_pdf: bool = False, source: str = f"{JOB}.tex"
) -> LatexError | None:
    """One xelatex pass run from `tex_dir` (what it may read), writing to `build`; None when it passed."""
    assert tools.xelatex is not None
    argv = [
        tools.xelatex,
        "-interaction=nonstopmode",
        "-halt-on-error",
        "-file-line-error",
        "-no-shell-escape",
        f"-output-directory={build}",
    ]
    argv += ["-no-pdf"] if no_pdf else []
    code, output, refused = await _run([*argv, source], tex_dir, timeout, readable=tex_dir, writable=build)
    if refused:
        return refused_error(refused)
    if code == -1:
        return LatexError(f"xelatex {output}")
    if code != 0:
        log = _read(build / f"{JOB}.log") or output
        return first_error(log) or LatexError(f"xelatex exited with status {code}")
    return None


def _driver(xelatex: str) -> str | None:
    """xdvipdfmx from xelatex's own installation (the driver xelatex would run), or None."""
    driver = Path(xelatex).with_name("xdvipdfmx")
    return str(driver) if driver.is_file() and os.access(driver, os.X_OK) else None


async def _to_pdf(driver: str, tex_dir: Path, build: Path, timeout: float) -> LatexError | None:
    """The last pass's XDV to the PDF, run from `tex_dir` like xelatex's own driver (figures are
    found by their paths relative to it)."""
    argv = [driver, "-q", "-E", "-o", str(build / f"{JOB}.pdf"), str(build / f"{JOB}.xdv")]
    code, output, refused = await _run(argv, tex_dir, timeout, readable=tex_dir, writable=build)
    if refused:
        return refused_error(refused)
    if code == -1:
        return LatexError(f"xdvipdfmx {output}", pass_name="xdvipdfmx")
    if code != 0:
        return LatexError(_tail(output) or f"exited with status {code}", pass_name="xdvipdfmx")
    return None


async def _bibliography(tools: Toolchain, tex_dir: Path, build: Path, timeout: float) -> tuple[str | None, str | None]:
    """Run biber or bibtex if the document asked for one; (tool run, problem or None)."""
    env = {"BIBINPUTS": f"{tex_dir}{os.pathsep}", "BSTINPUTS": f"{tex_dir}{os.pathsep}"}
    if (build / f"{JOB}.bcf").exists():
        if tools.biber is None:
            return "biber", "biber is not installed"
        argv = [tools.biber, f"--input-directory={tex_dir}", JOB]
        code, output, _ = await _run(argv, build, timeout, readable=tex_dir, writable=build, env=env)
        return "biber", None if code == 0 else _tail(output)
    if "\\bibdata" in (_read(build / f"{JOB}.aux") or ""):
        if tools.bibtex is None:
            return "bibtex", "bibtex is not installed"
        code, output, _ = await _run([tools.bibtex, JOB], build, timeout, readable=tex_dir, writable=build, env=env)
        return "bibtex", None if code in (0, 1) else _tail(output)  # 1 = warnings only
    return None, None


async def compile_tex(tex_path: Path, tools: Toolchain, *, timeout: float = 180.0) -> CompileResult:
    """Compile `tex_path` (report.tex); on success the PDF replaces the one next to it."""
    if tools.xelatex is None:
        return CompileResult(ok=False, error=LatexError("xelatex is not installed"))
    tex_dir = tex_path.resolve().parent
    build = tex_dir / BUILD_DIR
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    result = CompileResult(ok=False, log_path=build / f"{JOB}.log")
    # Every pass writes XDV only (-no-pdf) and xdvipdfmx turns the last pass's into the PDF, as
    # xelatex itself would (its driver is `xdvipdfmx -q -E`; the PDF differs only in its /ID): a
    # pass followed by a rerun makes no PDF that is thrown away. The driver is about half of a
    # pass's CPU here (README example, 3 passes: 0.85 vs 0.48 s with -no-pdf). Without it beside
    # xelatex the last passes make their PDF themselves, as before.
    driver = _driver(tools.xelatex)
    error = await _xelatex(tools, tex_dir, build, timeout, no_pdf=True)
    result.passes.append("xelatex")
    if error is None:
        tool, problem = await _bibliography(tools, tex_dir, build, timeout)
        if tool:
            result.passes.append(tool)
        if problem:
            result.warnings.append(f"{tool}: {problem}")
        for _ in range(2):  # references settle in at most two more passes
            error = await _xelatex(tools, tex_dir, build, timeout, no_pdf=driver is not None)
            result.passes.append("xelatex")
            if error is not None or "Rerun to get" not in (_read(build / f"{JOB}.log") or ""):
                break
    if error is None and driver is not None:
        error = await _to_pdf(driver, tex_dir, build, timeout)
        result.passes.append("xdvipdfmx")
    if error is not None:
        result.error = error
        return result
    produced = build / f"{JOB}.pdf"
    if not produced.is_file() or produced.stat().st_size == 0:
        result.error = LatexError("xelatex produced no PDF")
        return result
    final = tex_dir / f"{JOB}.pdf"
    os.replace(produced, final)  # atomic: the old PDF is replaced only by a complete new one
    result.ok, result.pdf, result.log_path = True, final, None
    shutil.rmtree(build, ignore_errors=True)  # kept only after a failure, for its log
    return result


async def check_compiles(tex: str, workdir: Path, tools: Toolchain, *, timeout: float = 120.0) -> LatexError | None:
    """One xelatex pass without PDF output, in a scratch folder; None when the source compiles.
    Runs from `workdir` so relative figure paths resolve as they will in the real compile."""
    if tools.xelatex is None:
        return None
    workdir = workdir.resolve()
    scratch = workdir / CHECK_DIR
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        (scratch / f"{JOB}.tex").write_text(tex, encoding="utf-8")
        return await _xelatex(tools, workdir, scratch, timeout, no_pdf=True, source=str(scratch / f"{JOB}.tex"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _tail(output: str, lines: int = 5) -> str:
    return " | ".join(line for line in output.strip().splitlines()[-lines:] if line.strip())
