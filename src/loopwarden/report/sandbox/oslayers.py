"""OS isolation layers for the figure child, through ctypes: Landlock (filesystem) and seccomp
(no sockets, no exec, no new processes). Standard library only: the child loads this file
directly, before running any untrusted code. The host uses `probe_*` to see what exists."""

from __future__ import annotations

import ctypes
import os
import platform
import struct

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

# seccomp: per architecture, (audit arch, denied syscalls, clone, clone3).
_SYSCALLS = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
            "execve": 59, "execveat": 322, "accept4": 288, "ptrace": 101, "fork": 57, "vfork": 58,
            "kill": 62, "mount": 165, "umount2": 166, "chroot": 161, "unshare": 272, "setns": 308,
            "bpf": 321, "perf_event_open": 298, "process_vm_readv": 310, "process_vm_writev": 311,
            "io_uring_setup": 425, "keyctl": 250, "add_key": 248,
        },
        56,
        435,
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198, "connect": 203, "accept": 202, "bind": 200, "listen": 201, "socketpair": 199,
            "execve": 221, "execveat": 281, "accept4": 242, "ptrace": 117, "kill": 129, "mount": 40,
            "umount2": 39, "chroot": 51, "unshare": 97, "setns": 268, "bpf": 280, "perf_event_open": 241,
            "process_vm_readv": 270, "process_vm_writev": 271, "io_uring_setup": 425, "keyctl": 219,
            "add_key": 217,
        },
        220,
        435,
    ),
}  # fmt: skip
CLONE_THREAD = 0x00010000
EPERM, ENOSYS = 1, 38
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000


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
    return platform.machine() in _SYSCALLS and os.path.exists("/proc/sys/kernel/seccomp/actions_avail")


def no_new_privs() -> None:
    _check(_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def apply_landlock(read_only: list[str], read_write: list[str], abi: int) -> None:
    """Restrict this process (and anything it starts) to reading `read_only` and writing
    `read_write` (both recursive). Paths that do not exist are ignored."""
    syscalls = _LANDLOCK[platform.machine()]
    handled = _ABI_BITS.get(abi, (1 << 16) - 1)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    attr = ctypes.create_string_buffer(struct.pack("<Q", handled))
    ruleset = _check(
        int(libc.syscall(ctypes.c_long(syscalls[0]), attr, ctypes.c_size_t(8), 0)), "landlock_create_ruleset"
    )
    try:
        for paths, rights in ((read_only, READ_RIGHTS), (read_write, WRITE_RIGHTS)):
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


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """A BPF filter: wrong architecture -> kill; denied syscalls -> EPERM; clone without
    CLONE_THREAD (a new process) -> EPERM; clone3 -> ENOSYS (libc falls back to clone, whose
    flags a filter can read); everything else allowed."""
    arch, denied, clone, clone3 = _SYSCALLS[machine or platform.machine()]
    ld_w_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    numbers = sorted(set(denied.values()))
    # Layout: [0] ld arch [1] jeq arch [2] kill [3] ld nr [4] x32 check, then one jeq per denied
    # syscall, jeq clone3, jeq clone, allow, [clone check: ld arg0, jset, allow], eperm, enosys.
    prog = [_bpf(ld_w_abs, 4), _bpf(jeq, arch, 1, 0), _bpf(ret, RET_KILL_PROCESS), _bpf(ld_w_abs, 0)]
    n = len(numbers)
    base = 5
    allow = base + n + 2
    clone_check = allow + 1
    eperm = clone_check + 3
    enosys = eperm + 1
    x32 = 0x40000000 if arch == 0xC000003E else 0xFFFFFFFF
    prog.append(_bpf(jge, x32, eperm - 4 - 1, 0))
    for i, nr in enumerate(numbers):
        here = base + i
        prog.append(_bpf(jeq, nr, eperm - here - 1, 0))
    prog.append(_bpf(jeq, clone3, enosys - (base + n) - 1, 0))
    prog.append(_bpf(jeq, clone, clone_check - (base + n + 1) - 1, 0))
    prog.append(_bpf(ret, RET_ALLOW))
    prog.append(_bpf(ld_w_abs, 16))  # low 32 bits of args[0] (little-endian): the clone flags
    prog.append(_bpf(jset, CLONE_THREAD, 0, eperm - (clone_check + 1) - 1))
    prog.append(_bpf(ret, RET_ALLOW))
    prog.append(_bpf(ret, RET_ERRNO | EPERM))
    prog.append(_bpf(ret, RET_ERRNO | ENOSYS))
    assert len(prog) == enosys + 1
    return prog


def apply_seccomp() -> None:
    program = seccomp_program()
    raw = b"".join(struct.pack("<HBBI", code, jt, jf, k) for code, jt, jf, k in program)
    buffer = ctypes.create_string_buffer(raw)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    no_new_privs()
    _check(_libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")
