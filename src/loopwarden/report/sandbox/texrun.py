"""Running TeX (xelatex, bibtex, biber) on model-written LaTeX, contained like figure code.

Two layers: TeX's own file policy (`openin_any=p`, `openout_any=p`: no absolute paths outside the
build folder, no `..`, no dot files; shell escape off, so `\\write18` runs nothing), and the same
OS isolation as figures (Landlock + seccomp through `launch.py`, or bubblewrap): the TeX
installation and system libraries read-only, the document's folder read-only, only the build
folder writable, nothing executable but system binaries, no network. CPU, memory, file size,
output and wall-clock limits hold in every case; with no isolation layer the TeX policy and the
limits still do. What TeX refused to open is read from its output and reported by name.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import launch as launch_module
from .isolation import Isolation, probe_isolation
from .process import ChildResult, ChildSpec, run_child
from .runner import python_paths

_REFUSED = re.compile(r"Not (?P<what>reading from|writing to) (?P<path>.+?) \(open(?:in|out)_any = p\)")
SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/etc/texmf",
    "/etc/fonts",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/var/lib/texmf",
    "/var/cache/fontconfig",
)
SYSTEM_EXECUTE = ("/usr/bin", "/bin", "/usr/lib", "/usr/libexec")


@dataclass(frozen=True)
class TexLimits:
    memory_bytes: int = 4 << 30
    file_bytes: int = 1 << 30
    output_bytes: int = 16 << 20


@dataclass
class TexRun:
    returncode: int
    output: str
    timed_out: bool = False
    limit: str | None = None
    refused_reads: list[str] = field(default_factory=list)
    refused_writes: list[str] = field(default_factory=list)
    layer: str = "none"


@functools.cache
def tex_isolation() -> Isolation:
    """The isolation this machine offers, probed once per process."""
    return probe_isolation()


def tex_root(program: str) -> str | None:
    """A TeX installation outside /usr (e.g. /usr/local/texlive/2024), from the binary's place."""
    real = Path(os.path.realpath(program))
    if real.is_relative_to("/usr") and not real.is_relative_to("/usr/local"):
        return None
    parents = real.parents
    return str(parents[2]) if len(parents) > 2 else None


async def run_tex(
    argv: list[str],
    *,
    cwd: Path,
    readable: list[Path],
    writable: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    isolation: Isolation | None = None,
    limits: TexLimits | None = None,
) -> TexRun:
    """Run one TeX program contained: it may read `readable` (and the TeX installation) and
    write only `writable`."""
    isolation = isolation if isolation is not None else tex_isolation()
    limits = limits or TexLimits()
    root = tex_root(argv[0])
    read_only = [*SYSTEM_READ, *([root] if root else []), *map(str, readable)]
    executable = [*SYSTEM_EXECUTE, *([root] if root else [])]
    layer = isolation.layer
    config = {
        "cpu_seconds": max(1, math.ceil(timeout)),
        "rlimit_as": limits.memory_bytes,
        "rlimit_fsize": limits.file_bytes,
        "landlock_abi": isolation.landlock_abi if layer == "landlock+seccomp" else None,
        "seccomp": isolation.seccomp and layer != "none",
        "read_only": read_only,
        "read_write": [str(writable), "/dev/null"],
        "executable": executable,
    }
    command = [sys.executable, "-I", str(launch_module.__file__), json.dumps(config), "--", *argv]
    if layer.startswith("bwrap"):
        assert isolation.bwrap is not None
        command = _bwrap(isolation.bwrap, read_only, writable, cwd) + command
    tex_env = {
        "PATH": os.pathsep.join(dict.fromkeys([*([str(Path(root) / "bin")] if root else []), "/usr/bin", "/bin"])),
        "HOME": str(writable),
        "TMPDIR": str(writable),
        "TEXMFOUTPUT": str(writable),
        "TEXMFVAR": str(writable / "texmf-var"),
        "openin_any": "p",
        "openout_any": "p",
        "shell_escape": "f",
        # TeX folds log lines at 79 characters by default, which cut error messages naming a file
        # under a long path (the missing figure's name was lost); the log is read by code.
        "max_print_line": "10000",
        "LANG": "C.UTF-8",
        **(env or {}),
    }
    spec = ChildSpec(argv=command, env=tex_env, cwd=str(cwd), wall_seconds=timeout, output_cap=limits.output_bytes)
    result = await run_child(spec)
    return _outcome(result, layer)


def _bwrap(bwrap: str, read_only: list[str], writable: Path, cwd: Path) -> list[str]:
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"]
    for path in [*read_only, *python_paths(), str(Path(launch_module.__file__).parent)]:
        argv += ["--ro-bind-try", path, path]
    return [*argv, "--bind", str(writable), str(writable), "--chdir", str(cwd), "--"]


def _outcome(result: ChildResult, layer: str) -> TexRun:
    output = result.stdout.text() + result.stderr.text()
    run = TexRun(
        returncode=result.returncode if result.returncode is not None else -1,
        output=output,
        timed_out=result.timed_out,
        limit=result.limit,
        layer=layer,
    )
    for match in _REFUSED.finditer(output):
        refused = run.refused_reads if match.group("what") == "reading from" else run.refused_writes
        if match.group("path") not in refused:
            refused.append(match.group("path"))
    return run
