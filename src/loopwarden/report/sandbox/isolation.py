"""Which OS isolation is available for the figure child, probed once per run."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from .oslayers import probe_landlock, probe_seccomp

Layer = str  # "landlock+seccomp" | "bwrap+seccomp" | "bwrap" | "rlimits-only" | "none"


@dataclass(frozen=True)
class Isolation:
    landlock_abi: int | None
    seccomp: bool
    bwrap: str | None
    """Path of a working bubblewrap, if any."""

    @property
    def layer(self) -> Layer:
        if self.landlock_abi and self.seccomp:
            return "landlock+seccomp"
        if self.bwrap:
            return "bwrap+seccomp" if self.seccomp else "bwrap"
        return "none"

    @property
    def isolated(self) -> bool:
        return self.layer != "none"

    @property
    def signal_containment(self) -> str:
        """What keeps the child's signals (and tracing) from reaching processes outside it."""
        if self.layer == "landlock+seccomp":
            scoped = self.landlock_abi is not None and self.landlock_abi >= 6
            return "Landlock signal scope + seccomp allowlist" if scoped else "seccomp allowlist"
        if self.layer.startswith("bwrap"):
            return "bubblewrap PID namespace" + (" + seccomp allowlist" if self.seccomp else "")
        return "none"

    def describe(self) -> str:
        landlock = f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no Landlock"
        seccomp = "seccomp" if self.seccomp else "no seccomp"
        bwrap = "bubblewrap" if self.bwrap else "no bubblewrap"
        layers = f"{landlock}, {seccomp}, {bwrap}: figure isolation layer = {self.layer}"
        return f"{layers}; signals contained by {self.signal_containment}"


def probe_bwrap() -> str | None:
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        done = subprocess.run(
            [path, "--ro-bind", "/", "/", "--unshare-net", "--", "/bin/true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if done.returncode == 0 else None


def probe_isolation() -> Isolation:
    return Isolation(landlock_abi=probe_landlock(), seccomp=probe_seccomp(), bwrap=probe_bwrap())
