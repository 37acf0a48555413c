"""OS isolation layers for the figure child, through ctypes: Landlock (filesystem) and seccomp
(an allowlist of system calls: no sockets, no exec, no new processes, no signals or tracing
of other processes). Standard library only: the child loads this file
directly, before running any untrusted code. The host uses `probe_*` to see what exists."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import struct
from collections.abc import Sequence
from types import ModuleType

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

_LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock filesystem access rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_ABI_BITS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_RIGHTS = READ_FILE | READ_DIR
WRITE_RIGHTS = READ_RIGHTS | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | TRUNCATE

# seccomp: per architecture, the audit arch and the x32 bit (x86_64 only).
_ARCH = {"x86_64": (0xC000003E, 0x40000000), "aarch64": (0xC00000B7, None)}
CLONE_THREAD = 0x00010000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME: a new namespace.
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
EPERM, ENOSYS = 1, 38
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
Profile = str  # "figure": no new processes; "exec": a TeX run, which starts its own helpers
# Landlock scopes (ABI 6): no signals to, and no abstract unix sockets of, processes outside.
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1


def _sibling(name: str) -> ModuleType:
    """A module next to this file, also when the child loaded this file by path (no package)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_lw_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


syscalls = _sibling("syscalls")


class IsolationError(Exception):
    pass


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise IsolationError(f"{what} failed: {os.strerror(err)}")
    return result


def probe_landlock() -> int | None:
    """The Landlock ABI version, or None when the kernel has no Landlock."""
    numbers = _LANDLOCK.get(platform.machine())
    if numbers is None:
        return None
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = int(libc.syscall(ctypes.c_long(numbers[0]), None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION))
    return version if version > 0 else None


def probe_seccomp() -> bool:
    """Whether seccomp filters are supported for this architecture."""
    return platform.machine() in _ARCH and os.path.exists("/proc/sys/kernel/seccomp/actions_avail")


def no_new_privs() -> None:
    _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def landlock_ruleset_attr(abi: int) -> bytes:
    """`struct landlock_ruleset_attr` for this ABI: every filesystem right it knows is handled
    (what no rule grants is refused); from ABI 4 TCP bind and connect are handled with no rule
    (refused); from ABI 6 the signal and abstract-unix-socket scopes are set, so no signal and no
    abstract socket reaches a process outside the sandbox."""
    handled = _ABI_BITS.get(abi, (1 << 16) - 1)
    if abi >= 6:
        return struct.pack("<QQQ", handled, NET_BIND_TCP | NET_CONNECT_TCP, SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET)
    if abi >= 4:
        return struct.pack("<QQ", handled, NET_BIND_TCP | NET_CONNECT_TCP)
    return struct.pack("<Q", handled)


def apply_landlock(read_only: list[str], read_write: list[str], abi: int, executable: Sequence[str] = ()) -> None:
    """Restrict this process (and anything it starts) to reading `read_only`, writing
    `read_write` and executing from `executable` (all recursive). Paths that do not exist are
    ignored."""
    syscalls = _LANDLOCK[platform.machine()]
    handled = _ABI_BITS.get(abi, (1 << 16) - 1)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    raw = landlock_ruleset_attr(abi)
    attr = ctypes.create_string_buffer(raw)
    ruleset = _check(
        int(libc.syscall(ctypes.c_long(syscalls[0]), attr, ctypes.c_size_t(len(raw)), 0)), "landlock_create_ruleset"
    )
    try:
        rules = ((read_only, READ_RIGHTS), (read_write, WRITE_RIGHTS), (executable, READ_RIGHTS | EXECUTE))
        for paths, rights in rules:
            for path in paths:
                _add_rule(libc, syscalls[1], ruleset, path, rights & handled)
        no_new_privs()
        _check(int(libc.syscall(ctypes.c_long(syscalls[2]), ruleset, 0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _add_rule(libc: ctypes.CDLL, nr: int, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd))  # packed struct
        _check(int(libc.syscall(ctypes.c_long(nr), ruleset, LANDLOCK_RULE_PATH_BENEATH, attr, 0)), f"rule {path}")
    finally:
        os.close(fd)


Instruction = tuple[int, int, int, int]
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH_OFFSET = 0, 4


def _arg(index: int, high: bool = False) -> int:
    """Offset of a syscall argument's low (or high) 32 bits in `struct seccomp_data`."""
    return 16 + 8 * index + (4 if high else 0)


def _ret(action: int) -> Instruction:
    return (_RET, 0, 0, action)


def _case(nr: int, body: list[Instruction]) -> list[Instruction]:
    """`if nr == NR: body` (body ends in a return); all jumps stay short (< 256)."""
    return [(_JEQ, 0, len(body), nr), *body]


def seccomp_program(machine: str | None = None, profile: Profile = "figure", pid: int = 0) -> list[Instruction]:
    """The BPF filter: an allowlist. Wrong architecture or an x32 call -> kill/EPERM; KILL
    syscalls -> kill the process (reported as a denied operation); DENY -> EPERM; ALLOW ->
    allowed; kill/tgkill only to this process (`pid`); prlimit64 only to read; clone only for
    a thread (or, in the exec profile, a process) and never into new namespaces; clone3 ->
    ENOSYS (libc falls back to clone, whose flags a filter can read); anything else -> ENOSYS."""
    machine = machine or platform.machine()
    arch, x32 = _ARCH[machine]
    allow, deny, kill = (syscalls.table(machine, group) for group in ("ALLOW", "DENY", "KILL"))
    special = syscalls.table(machine, "SPECIAL")
    if profile == "exec":  # TeX pipes its output through xdvipdfmx (popen: fork + exec of sh)
        processes = {name: deny.pop(name) for name in ("execve", "fork", "vfork") if name in deny}
        allow = {**allow, **processes}
    prog: list[Instruction] = [(_LD, 0, 0, _ARCH_OFFSET), (_JEQ, 1, 0, arch), _ret(RET_KILL_PROCESS), (_LD, 0, 0, _NR)]
    if x32 is not None:
        prog += [(_JGE, 0, 1, x32), _ret(RET_ERRNO | EPERM)]
    for nr in allow.values():  # the common case first
        prog += _case(nr, [_ret(RET_ALLOW)])
    own_pid = [(_LD, 0, 0, _arg(0)), (_JEQ, 0, 1, pid & 0xFFFFFFFF), _ret(RET_ALLOW), _ret(RET_KILL_PROCESS)]
    prog += _case(special["kill"], own_pid)
    prog += _case(special["tgkill"], own_pid)
    read_only = [(_LD, 0, 0, _arg(2)), (_JEQ, 0, 3, 0), (_LD, 0, 0, _arg(2, high=True)), (_JEQ, 0, 1, 0)]
    prog += _case(special["prlimit64"], [*read_only, _ret(RET_ALLOW), _ret(RET_ERRNO | EPERM)])
    new_process = RET_ALLOW if profile == "exec" else RET_ERRNO | EPERM
    clone = [(_LD, 0, 0, _arg(0)), (_JSET, 0, 1, CLONE_NEW_ANY), _ret(RET_KILL_PROCESS), (_JSET, 0, 1, CLONE_THREAD)]
    prog += _case(special["clone"], [*clone, _ret(RET_ALLOW), _ret(new_process)])
    prog += _case(special["clone3"], [_ret(RET_ERRNO | ENOSYS)])
    for nr in kill.values():
        prog += _case(nr, [_ret(RET_KILL_PROCESS)])
    for nr in deny.values():
        prog += _case(nr, [_ret(RET_ERRNO | EPERM)])
    prog.append(_ret(RET_ERRNO | ENOSYS))
    return prog


def apply_seccomp(profile: Profile = "figure") -> None:
    program = seccomp_program(profile=profile, pid=os.getpid())
    raw = b"".join(struct.pack("<HBBI", code, jt, jf, k) for code, jt, jf, k in program)
    buffer = ctypes.create_string_buffer(raw)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    no_new_privs()
    _check(_libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")
