"""Running model-written figure code: static check, then a separate, isolated child process.

The child (`python -I child.py`) gets an empty environment, a fresh working directory and
MPLCONFIGDIR inside a staging folder, rlimits set by the trusted bootstrap, a wall-clock kill of
its whole process group, and OS isolation: Landlock (read-only data and Python; write only the
staging folder inside the run's output folder) + seccomp (no sockets, no exec, no new processes),
or bubblewrap. The runtime saves the figure; the host reads back only the file it named, checks
it is a regular PNG, and never unpickles anything from the child.

Under Landlock (and rlimits-only) the child is forked by the process's figure zygote, which
imported the plotting stack once (forkserver.py, zygote.py), and from the fork on does exactly
what a spawned child does; under bubblewrap, or when the zygote cannot start or dies, each figure
spawns `python -I child.py` as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..folder import paths as paths_module
from . import child as child_module
from . import fontcache, forkserver
from . import oslayers as oslayers_module
from .isolation import Isolation
from .process import ChildResult, ChildSpec, run_child, signal_name
from .staging import StagingWatch
from .static import check_code

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_FIGURE_BYTES = 20 << 20
FONT_READABLE = ["/usr/share/fonts", "/usr/share/matplotlib"]


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 30
    memory_bytes: int = 2 << 30
    file_bytes: int = 50 << 20
    open_files: int = 256
    wall_seconds: float = 60.0
    output_bytes: int = 16 << 20
    """stdout + stderr the child may write (read as it comes, mostly discarded) before it is killed."""
    staging_bytes: int = 200 << 20
    """Total bytes the figure's staging folder may hold (each file is also capped by file_bytes)."""
    staging_files: int = 2000


@dataclass
class FigureOutcome:
    ok: bool
    message: str
    error_type: str | None = None
    path: str | None = None
    """Relative to out_dir, when ok."""
    output: str = ""
    pgid_gone: bool = True
    problems: list[str] = field(default_factory=list)


def safe_filename(name: str) -> str:
    stem = Path(name).stem if name else "figure"
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_")[:60] or "figure"
    return f"{stem}.png"


class FigureSandbox:
    def __init__(
        self,
        data_root: Path,
        out_dir: Path,
        isolation: Isolation,
        *,
        allow_rlimits_only: bool = False,
        limits: Limits | None = None,
    ) -> None:
        self.data_root = Path(os.path.realpath(data_root))
        self.out_dir = Path(os.path.realpath(out_dir))
        self.isolation = isolation
        self.allow_rlimits_only = allow_rlimits_only
        self.limits = limits or Limits()
        self._count = 0

    @property
    def enabled(self) -> bool:
        return self.isolation.isolated or self.allow_rlimits_only

    @property
    def layer(self) -> str:
        return (
            self.isolation.layer if self.isolation.isolated else "rlimits-only" if self.allow_rlimits_only else "none"
        )

    async def run(self, code: str, filename: str, tables: dict[str, dict[str, Any]] | None = None) -> FigureOutcome:
        """`tables`: how each profiled table is written (`read_spec`), so `load(path)` in the
        figure code reads it as the profile did: same delimiter, lines skipped and column names."""
        if not self.enabled:
            return FigureOutcome(False, "figures are switched off: no OS isolation layer", "figures_disabled")
        problems = check_code(code)
        if problems:
            message = "the figure code was not run: " + "; ".join(problems)
            return FigureOutcome(False, message, "code_rejected", problems=problems)
        self._count += 1
        staging = self.out_dir / ".sandbox" / f"fig{self._count}"
        _fresh(staging)
        try:
            return await self._run_child(code, safe_filename(filename), staging, tables or {})
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _config(self, code: str, staging: Path, tables: dict[str, dict[str, Any]]) -> dict[str, Any]:
        limits = self.limits
        return {
            "code": code,
            "tables": tables,
            "workdir": str(staging / "work"),
            "figure_path": str(staging / "figure.png"),
            "data_root": str(self.data_root),
            "paths_module": paths_module.__file__,
            "oslayers_module": oslayers_module.__file__,
            "cpu_seconds": limits.cpu_seconds,
            "memory_bytes": limits.memory_bytes,
            "file_bytes": limits.file_bytes,
            "open_files": limits.open_files,
            "landlock_abi": self.isolation.landlock_abi if self.layer == "landlock+seccomp" else None,
            "seccomp": self.isolation.seccomp and self.layer != "rlimits-only",
            "read_only": [*python_paths(), str(self.data_root), *FONT_READABLE],
            "read_write": [str(staging), "/dev/null"],
        }

    def _argv(self, staging: Path) -> list[str]:
        python = [sys.executable, "-I", str(child_module.__file__)]
        if not self.layer.startswith("bwrap"):
            return python
        assert self.isolation.bwrap is not None
        argv = [self.isolation.bwrap, "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
        for path in ["/usr", "/lib", "/lib64", "/bin", "/etc/fonts", *python_paths()]:
            argv += ["--ro-bind-try", path, path]
        argv += ["--ro-bind", str(self.data_root), str(self.data_root)]
        # The child runs child.py and loads the path guard and the OS layers by file path.
        modules = (child_module, paths_module, oslayers_module)
        for folder in sorted({str(Path(str(module.__file__)).parent) for module in modules}):
            argv += ["--ro-bind", folder, folder]
        argv += ["--bind", str(staging), str(staging), "--chdir", str(staging / "work"), "--"]
        return argv + python

    async def _run_child(
        self, code: str, filename: str, staging: Path, tables: dict[str, dict[str, Any]]
    ) -> FigureOutcome:
        env = {"MPLCONFIGDIR": str(staging / "mpl"), **CHILD_ENV}
        nonce = secrets.token_hex(16)
        config = {**self._config(code, staging, tables), "env": env, "nonce": nonce}
        limits = self.limits
        spec = ChildSpec(
            argv=self._argv(staging),
            env=env,
            cwd=str(staging / "work"),
            wall_seconds=limits.wall_seconds,
            output_cap=limits.output_bytes,
            status_channel=True,
            watcher=StagingWatch(staging, limits.staging_bytes, limits.staging_files).check,
        )
        result = await self._forked(spec, config) if self.uses_zygote else None
        if result is None:
            await asyncio.to_thread(fontcache.seed, staging / "mpl", FONT_READABLE + python_paths())
            result = await run_child(spec, lambda fd: json.dumps({**config, "status_fd": fd}).encode())
        outcome = self._judge(result, nonce, staging)
        if outcome is None:
            status = _status(result, nonce)
            assert status is not None
            outcome = self._collect(staging / "figure.png", filename, str(status.get("output", "")), result.pgid_gone)
        outcome.message = self._scrub(outcome.message, staging)
        outcome.output = self._scrub(outcome.output, staging)
        return outcome

    @property
    def uses_zygote(self) -> bool:
        """Figures forked by the process's zygote (forkserver.py); bubblewrap spawns each one."""
        return forkserver.enabled() and not self.layer.startswith("bwrap")

    async def _forked(self, spec: ChildSpec, config: dict[str, Any]) -> ChildResult | None:
        """The child forked by the zygote; None when there is none or it died while the child ran
        (the child died with it): the figure is then spawned, from a fresh staging folder."""
        zygote = await asyncio.to_thread(forkserver.get, CHILD_ENV, FONT_READABLE + python_paths())
        if zygote is None:
            return None
        result = await forkserver.run_forked(zygote, spec, json.dumps({**config, "status_fd": 3}).encode())
        if result is not None and result.unreported:
            await asyncio.to_thread(_fresh, Path(spec.cwd).parent)
            return None
        return result

    def _judge(self, result: ChildResult, nonce: str, staging: Path) -> FigureOutcome | None:
        """The parent's own verdict on a finished child; None when it may have drawn a figure."""
        gone, limits = result.pgid_gone, self.limits
        if result.timed_out:
            message = f"the figure code was stopped after {limits.wall_seconds:g} s (wall-clock limit)"
            return FigureOutcome(False, message, "timeout", pgid_gone=gone)
        # A staging breach found only now (between two looks of the watcher) is still a breach.
        limit = result.limit or StagingWatch(staging, limits.staging_bytes, limits.staging_files).check()
        if limit is not None:
            return FigureOutcome(False, _limit_message(limit, limits), "resource_limit", pgid_gone=gone)
        died = signal_name(result.returncode)
        if died == "SIGSYS":
            return FigureOutcome(False, DENIED_MESSAGE, "denied_operation", pgid_gone=gone)
        status = _status(result, nonce)
        if status is None:
            if result.status.total:  # something was written on the channel, but not one honest line
                message = "the figure run's status channel was tampered with; the figure is refused"
                return FigureOutcome(False, message, "status_forged", pgid_gone=gone)
            return FigureOutcome(False, _died(result), "crashed", pgid_gone=gone)
        if result.returncode != 0:
            return FigureOutcome(False, _died(result), "crashed", pgid_gone=gone)
        if not status.get("ok"):
            message = str(status.get("message", "the figure code failed"))
            output = str(status.get("output", ""))
            return FigureOutcome(False, message, str(status.get("error_type")), output=output, pgid_gone=gone)
        return None

    def _scrub(self, text: str, staging: Path) -> str:
        """Host paths of the sandbox never reach the model: the working folder is `.`, the data
        folder is the data root the model's paths are relative to."""
        for path, shown in ((staging / "work", "."), (staging, "<sandbox>"), (self.data_root, "<data>")):
            text = text.replace(f"{path}/", f"{shown}/" if shown != "." else "").replace(str(path), shown)
        return text.replace(str(self.out_dir), "<output>")

    def _collect(self, produced: Path, filename: str, output: str, gone: bool) -> FigureOutcome:
        """Read back only the named file: a regular file (no link), PNG, bounded size."""
        try:
            fd = os.open(produced, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return FigureOutcome(False, "the figure file was not produced", "no_figure", pgid_gone=gone)
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            data = f.read(MAX_FIGURE_BYTES + 1)
        if not stat.S_ISREG(info.st_mode) or len(data) > MAX_FIGURE_BYTES or not data.startswith(PNG_MAGIC):
            return FigureOutcome(False, "the figure file is not a PNG of acceptable size", "bad_figure", pgid_gone=gone)
        figures = self.out_dir / "figures"
        figures.mkdir(parents=True, exist_ok=True)
        target = figures / filename
        target.write_bytes(data)
        rel = target.relative_to(self.out_dir).as_posix()
        return FigureOutcome(True, f"figure saved as {rel}", path=rel, output=output, pgid_gone=gone)


CHILD_ENV = {"MPLBACKEND": "Agg", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""A figure child's whole environment, with its MPLCONFIGDIR (the zygote's too, with its own)."""


def _fresh(staging: Path) -> None:
    """An empty staging folder. The old one is first renamed aside, then removed: removing it in
    place raced anything still writing into it (a file made after the removal listed the folder
    left it standing, and making it afresh then failed with FileExistsError)."""
    if staging.exists():
        aside = staging.with_name(f"{staging.name}.old-{secrets.token_hex(4)}")
        staging.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)
    (staging / "work").mkdir(parents=True)
    (staging / "mpl").mkdir()


DENIED_MESSAGE = (
    "the figure code attempted a forbidden operation (a signal to another process, process tracing, "
    "or a namespace, mount, keyring, BPF or io_uring call) and was stopped"
)


def _status(result: ChildResult, nonce: str) -> dict[str, Any] | None:
    """The bootstrap's report: exactly one JSON line on the status channel, with this run's nonce."""
    if result.status.total > result.status.keep:
        return None
    raw = result.status.text()
    if raw.count("\n") != 1 or not raw.endswith("\n"):
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not secrets.compare_digest(str(value.pop("nonce", "")), nonce):
        return None
    return value


def _limit_message(limit: str, limits: Limits) -> str:
    if limit == "output":
        return f"the figure code wrote more than {limits.output_bytes} bytes of output and was stopped (output limit)"
    if limit == "status":
        return "the figure code flooded the sandbox's status channel and was stopped"
    return f"the figure code {limit} and was stopped (staging limit)"


def _died(result: ChildResult) -> str:
    name = signal_name(result.returncode)
    if name is not None:
        reason = {
            "SIGXCPU": "CPU time limit",
            "SIGXFSZ": "file size limit",
            "SIGKILL": "killed",
            "SIGSYS": "forbidden system call",
        }.get(name, name)
        return f"the figure process died ({reason})"
    tail = result.stderr.text().strip().splitlines()[-3:]
    return f"the figure process exited with code {result.returncode}: {' / '.join(tail)}"


def python_paths() -> list[str]:
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            found.add(sysconfig.get_paths()[key])
    # Only installed packages: not the working directory or a source checkout on sys.path.
    found.update(p for p in sys.path if p and os.path.isdir(p) and ("site-packages" in p or "dist-packages" in p))
    return sorted(found)
