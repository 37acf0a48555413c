"""Running model-written figure code: static check, then a separate, isolated child process.

The child (`python -I child.py`) gets an empty environment, a fresh working directory and
MPLCONFIGDIR inside a staging folder, rlimits set by the trusted bootstrap, a wall-clock kill of
its whole process group, and OS isolation: Landlock (read-only data and Python; write only the
staging folder inside the run's output folder) + seccomp (no sockets, no exec, no new processes),
or bubblewrap. The runtime saves the figure; the host reads back only the file it named, checks
it is a regular PNG, and never unpickles anything from the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import stat
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paths as paths_module
from . import child as child_module
from . import oslayers as oslayers_module
from .isolation import Isolation
from .static import check_code

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_FIGURE_BYTES = 20 << 20


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 30
    memory_bytes: int = 2 << 30
    file_bytes: int = 50 << 20
    open_files: int = 256
    wall_seconds: float = 60.0


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

    async def run(self, code: str, filename: str) -> FigureOutcome:
        if not self.enabled:
            return FigureOutcome(False, "figures are switched off: no OS isolation layer", "figures_disabled")
        problems = check_code(code)
        if problems:
            message = "the figure code was not run: " + "; ".join(problems)
            return FigureOutcome(False, message, "code_rejected", problems=problems)
        self._count += 1
        staging = self.out_dir / ".sandbox" / f"fig{self._count}"
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "work").mkdir(parents=True)
        (staging / "mpl").mkdir()
        try:
            return await self._run_child(code, safe_filename(filename), staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _config(self, code: str, staging: Path) -> dict[str, Any]:
        limits = self.limits
        return {
            "code": code,
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
            "read_only": [*_python_paths(), str(self.data_root), "/usr/share/fonts", "/usr/share/matplotlib"],
            "read_write": [str(staging), "/dev/null"],
        }

    def _argv(self, staging: Path) -> list[str]:
        python = [sys.executable, "-I", str(child_module.__file__)]
        if not self.layer.startswith("bwrap"):
            return python
        assert self.isolation.bwrap is not None
        argv = [self.isolation.bwrap, "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
        for path in ["/usr", "/lib", "/lib64", "/bin", "/etc/fonts", *_python_paths()]:
            argv += ["--ro-bind-try", path, path]
        argv += ["--ro-bind", str(self.data_root), str(self.data_root)]
        argv += ["--ro-bind", str(Path(paths_module.__file__).parent), str(Path(paths_module.__file__).parent)]
        argv += ["--bind", str(staging), str(staging), "--chdir", str(staging / "work"), "--"]
        return argv + python

    async def _run_child(self, code: str, filename: str, staging: Path) -> FigureOutcome:
        env = {
            "MPLCONFIGDIR": str(staging / "mpl"),
            "MPLBACKEND": "Agg",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        process = await asyncio.create_subprocess_exec(
            *self._argv(staging),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=str(staging / "work"),
            start_new_session=True,
        )
        payload = json.dumps(self._config(code, staging)).encode()
        timed_out = False
        try:
            async with asyncio.timeout(self.limits.wall_seconds):
                stdout, stderr = await process.communicate(payload)
        except TimeoutError:
            timed_out = True
            stdout, stderr = b"", b""
        finally:
            gone = await _kill_group(process)
        if timed_out:
            message = f"the figure code was stopped after {self.limits.wall_seconds:g} s (wall-clock limit)"
            return FigureOutcome(False, message, "timeout", pgid_gone=gone)
        status = _last_json_line(stdout)
        if status is None:
            return FigureOutcome(False, _died(process.returncode, stderr), "crashed", pgid_gone=gone)
        if not status.get("ok"):
            message = str(status.get("message", "the figure code failed"))
            return FigureOutcome(
                False, message, str(status.get("error_type")), output=str(status.get("output", "")), pgid_gone=gone
            )
        return self._collect(staging / "figure.png", filename, str(status.get("output", "")), gone)

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


async def _kill_group(process: asyncio.subprocess.Process) -> bool:
    """Kill whatever is left of the child's process group; True when the group is gone."""
    pgid = process.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await process.wait()
    for _ in range(100):
        if not _live_members(pgid):
            return True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        await asyncio.sleep(0.02)
    return False


def _live_members(pgid: int) -> list[int]:
    """Processes of the group that still run. Zombies (dead, waiting for a parent that is not
    ours to reap them, e.g. after bubblewrap's PID namespace) do not count."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            live.append(int(entry))
    return live


def _last_json_line(stdout: bytes) -> dict[str, Any] | None:
    for line in reversed(stdout.decode("utf-8", errors="replace").splitlines()):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None


def _died(returncode: int | None, stderr: bytes) -> str:
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name
        reason = {
            "SIGXCPU": "CPU time limit",
            "SIGXFSZ": "file size limit",
            "SIGKILL": "killed",
            "SIGSYS": "forbidden system call",
        }.get(name, name)
        return f"the figure process died ({reason})"
    tail = stderr.decode("utf-8", errors="replace").strip().splitlines()[-3:]
    return f"the figure process exited with code {returncode}: {' / '.join(tail)}"


def _python_paths() -> list[str]:
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            found.add(sysconfig.get_paths()[key])
    # Only installed packages: not the working directory or a source checkout on sys.path.
    found.update(p for p in sys.path if p and os.path.isdir(p) and ("site-packages" in p or "dist-packages" in p))
    return sorted(found)
