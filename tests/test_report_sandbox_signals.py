"""Figure code that reaches raw system calls (numpy exposes ctypes) tries every way of signalling
or tracing a process outside the sandbox: the parent that runs the sandbox, and a sibling process
of the same user. Each attempt must fail, both must stay alive, and the figure run must report a
denied operation. Real child processes, real kernel."""

from __future__ import annotations

import asyncio
import json
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import sandboxkit
from helpers import require_binary
from loopwarden.report.sandbox import syscalls
from loopwarden.report.sandbox.isolation import Isolation, probe_bwrap, probe_isolation
from loopwarden.report.sandbox.oslayers import apply_landlock
from loopwarden.report.sandbox.runner import FigureSandbox, Limits

folders = sandboxkit.folders  # the fixture
ISOLATION = probe_isolation()
needs_seccomp = pytest.mark.skipif(
    not (ISOLATION.isolated and ISOLATION.seccomp), reason="no isolation layer with seccomp on this machine"
)
SPECIAL = syscalls.table(platform.machine(), "SPECIAL") if platform.machine() in syscalls.MACHINES else {}
KILL = syscalls.table(platform.machine(), "KILL") if platform.machine() in syscalls.MACHINES else {}
LIBC = "libc = np.ctypeslib.ctypes.CDLL(None, use_errno=True)\ninfo = np.zeros(32, dtype=np.int32)\n"
INFO = "info[0] = 9\ninfo[2] = -1\n"  # si_signo = SIGKILL, si_code = SI_QUEUE


def routes() -> dict[str, str]:
    """Figure code per route; {target} is the pid attacked (also its process group)."""
    if not SPECIAL:
        return {}
    k = {**SPECIAL, **KILL}
    return {
        "kill": f"rc = libc.syscall({k['kill']}, {{target}}, 9)",
        "kill_process_group": f"rc = libc.syscall({k['kill']}, -{{target}}, 9)",
        "tkill": f"rc = libc.syscall({k['tkill']}, {{target}}, 9)",
        "tgkill": f"rc = libc.syscall({k['tgkill']}, {{target}}, {{target}}, 9)",
        "rt_sigqueueinfo": INFO + f"rc = libc.syscall({k['rt_sigqueueinfo']}, {{target}}, 9, info.ctypes.data)",
        "rt_tgsigqueueinfo": INFO
        + f"rc = libc.syscall({k['rt_tgsigqueueinfo']}, {{target}}, {{target}}, 9, info.ctypes.data)",
        "pidfd_send_signal": f"fd = libc.syscall({k['pidfd_open']}, {{target}}, 0)\n"
        f"rc = libc.syscall({k['pidfd_send_signal']}, fd, 9, None, 0)",
        "ptrace_attach": f"rc = libc.syscall({k['ptrace']}, 16, {{target}}, None, None)",
        "process_vm_readv": f"rc = libc.syscall({k['process_vm_readv']}, {{target}}, info.ctypes.data, 1, "
        "info.ctypes.data, 1, 0)",
    }


ROUTES = routes()


def attack(route: str, target: str) -> str:
    return LIBC + ROUTES[route].replace("{target}", target) + "\nplt.plot([rc])\n"


@pytest.fixture
def sibling() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the same user, outside the sandbox, in a process group of its own."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def alive_and_running(pid: int) -> bool:
    """Not dead, not a zombie, not stopped by a tracer."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X", "T", "t")


@needs_seccomp
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_signal_routes_to_a_sibling_are_denied_and_reported(
    route: str, folders: tuple[Path, Path], sibling: subprocess.Popen[bytes]
) -> None:
    box = FigureSandbox(*folders, ISOLATION, limits=Limits(wall_seconds=60))
    outcome = asyncio.run(box.run(attack(route, str(sibling.pid)), "attack"))
    assert not outcome.ok and outcome.error_type == "denied_operation", (outcome.error_type, outcome.message)
    assert "forbidden operation" in outcome.message and outcome.pgid_gone
    assert sibling.poll() is None and alive_and_running(sibling.pid)


@needs_seccomp
def test_signal_routes_to_the_sandbox_parent_are_denied_and_reported(folders: tuple[Path, Path]) -> None:
    """The parent is a separate process running the sandbox (as `loopwarden serve` would), so a
    hole kills it and not the test runner; it reports each outcome as a line."""
    codes = [attack(route, "{parent}") for route in sorted(ROUTES)]
    parent = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("sandbox_parent.py")), *map(str, folders)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    stdout, _ = parent.communicate(json.dumps(codes).encode(), timeout=600)
    assert parent.returncode == 0, f"the sandbox parent died: {parent.returncode}"
    outcomes = [json.loads(line) for line in stdout.decode().splitlines()]
    assert len(outcomes) == len(codes)
    for route, outcome in zip(sorted(ROUTES), outcomes, strict=True):
        assert outcome["error_type"] == "denied_operation", (route, outcome)


@needs_seccomp
def test_signals_to_itself_still_work(folders: tuple[Path, Path]) -> None:
    """The allowlist lets a process signal itself (raise(), abort() use tgkill on their own pid)."""
    code = "libc = np.ctypeslib.ctypes.CDLL(None)\nlibc.signal(10, 1)\n"  # SIGUSR1 ignored
    code += f"rc = libc.syscall({SPECIAL['kill']}, libc.getpid(), 10)\nplt.plot([rc])\n"
    outcome = asyncio.run(FigureSandbox(*folders, ISOLATION).run(code, "self"))
    assert outcome.ok, outcome.message


def test_landlock_signal_scope_alone_refuses_a_signal_to_a_sibling(sibling: subprocess.Popen[bytes]) -> None:
    """The second layer on its own: a process under Landlock's signal scope (ABI 6) cannot
    signal outside its domain, with no seccomp filter at all."""
    if (ISOLATION.landlock_abi or 0) < 6:
        pytest.skip(f"Landlock ABI {ISOLATION.landlock_abi}: no signal scope on this kernel")
    probe = (
        "import os, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from oslayers import apply_landlock\n"
        f"apply_landlock([], [], {ISOLATION.landlock_abi})\n"
        "try:\n    os.kill(int(sys.argv[2]), 9)\nexcept PermissionError:\n    print('refused')\n"
    )
    folder = str(Path(apply_landlock.__code__.co_filename).parent)
    done = subprocess.run([sys.executable, "-I", "-c", probe, folder, str(sibling.pid)], capture_output=True)
    assert done.stdout.decode().strip() == "refused", done.stderr.decode()
    assert sibling.poll() is None


def test_bubblewrap_pid_namespace_alone_keeps_signals_inside(
    folders: tuple[Path, Path], sibling: subprocess.Popen[bytes]
) -> None:
    """Where the kernel has neither Landlock scoping nor seccomp, bubblewrap's PID namespace is
    the layer: host pids do not exist inside it, so every route misses."""
    require_binary("bwrap")
    path = probe_bwrap()
    if path is None:
        pytest.skip("bwrap is installed but cannot create namespaces here")
    isolation = Isolation(landlock_abi=None, seccomp=False, bwrap=path)
    assert isolation.signal_containment == "bubblewrap PID namespace"
    box = FigureSandbox(*folders, isolation, limits=Limits(wall_seconds=60))
    for route in ("kill", "tgkill", "pidfd_send_signal"):
        outcome = asyncio.run(box.run(attack(route, str(sibling.pid)), "attack"))
        assert outcome.pgid_gone, route
        assert sibling.poll() is None and alive_and_running(sibling.pid), route


def test_the_isolation_report_names_the_signal_layer() -> None:
    described = ISOLATION.describe()
    assert "signals contained by" in described
    scoped = Isolation(landlock_abi=6, seccomp=True, bwrap=None)
    assert scoped.signal_containment == "Landlock signal scope + seccomp allowlist"
    assert Isolation(landlock_abi=3, seccomp=True, bwrap=None).signal_containment == "seccomp allowlist"
    assert Isolation(None, False, None).signal_containment == "none"
