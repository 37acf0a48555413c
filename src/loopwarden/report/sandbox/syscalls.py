"""System call numbers for the sandbox's seccomp policy, per architecture, as `name=number` text
(generated from the kernel's uapi headers: asm/unistd_64.h and asm-generic/unistd.h).

- ALLOW: what a Python child running numpy, pandas and matplotlib (or a TeX run) needs on files it
  may open (Landlock or bubblewrap decide which), memory, its own threads, time and its own signals.
- DENY: answered with EPERM, so the code gets a clear "Operation not permitted": sockets, exec,
  new processes (figures only), raising resource limits.
- KILL: never needed by a plotting stack, only by an escape: signals, tracing or memory access to
  other processes, pidfds, keyrings, BPF, mounts and namespaces, io_uring, modules, kexec, reboot.
  The process is killed at the first attempt, and the run reports a denied operation.
- SPECIAL: allowed only with safe arguments (see oslayers.seccomp_program).
Anything else fails with ENOSYS, so a library that probes a newer call falls back.
Standard library only: the child loads this file by path before it runs any untrusted code.
"""

from __future__ import annotations

X86_64_ALLOW = """
    read=0 write=1 readv=19 writev=20 pread64=17 pwrite64=18 preadv=295 pwritev=296 preadv2=327 pwritev2=328
    lseek=8 close=3 close_range=436 open=2 openat=257 openat2=437 stat=4 fstat=5 lstat=6 newfstatat=262
    statx=332 statfs=137 fstatfs=138 access=21 faccessat=269 faccessat2=439 readlink=89 readlinkat=267
    getdents=78 getdents64=217 getcwd=79 chdir=80 fchdir=81 mkdir=83 mkdirat=258 rmdir=84 unlink=87
    unlinkat=263 rename=82 renameat=264 renameat2=316 umask=95 utimensat=280 truncate=76 ftruncate=77
    fallocate=285 fsync=74 fdatasync=75 flock=73 fcntl=72 ioctl=16 fadvise64=221 readahead=187 sendfile=40
    copy_file_range=326 pipe=22 pipe2=293 dup=32 dup2=33 dup3=292 poll=7 ppoll=271 select=23 pselect6=270
    epoll_create=213 epoll_create1=291 epoll_ctl=233 epoll_wait=232 epoll_pwait=281 epoll_pwait2=441
    eventfd=284 eventfd2=290 timerfd_create=283 timerfd_settime=286 timerfd_gettime=287 mmap=9 munmap=11
    mprotect=10 mremap=25 brk=12 madvise=28 mincore=27 msync=26 membarrier=324 get_mempolicy=239 futex=202
    futex_waitv=449 set_robust_list=273 set_tid_address=218 rseq=334 arch_prctl=158 sched_yield=24
    sched_getaffinity=204 sched_getparam=143 sched_getscheduler=145 sched_get_priority_max=146
    sched_get_priority_min=147 getpriority=140 nanosleep=35 clock_nanosleep=230 clock_gettime=228
    clock_getres=229 gettimeofday=96 time=201 getitimer=36 setitimer=38 alarm=37 timer_create=222
    timer_settime=223 timer_gettime=224 timer_getoverrun=225 timer_delete=226 rt_sigaction=13
    rt_sigprocmask=14 rt_sigreturn=15 rt_sigpending=127 rt_sigtimedwait=128 rt_sigsuspend=130 sigaltstack=131
    pause=34 restart_syscall=219 getpid=39 getppid=110 gettid=186 getuid=102 geteuid=107 getgid=104
    getegid=108 getgroups=115 getresuid=118 getresgid=120 getpgrp=111 getpgid=121 getsid=124 uname=63
    sysinfo=99 times=100 getrusage=98 getrlimit=97 getcpu=309 getrandom=318 capget=125 exit=60 exit_group=231
    wait4=61 waitid=247 futex_wake=454 futex_wait=455 futex_requeue=456
"""
X86_64_DENY = """
    socket=41 connect=42 accept=43 accept4=288 bind=49 listen=50 socketpair=53 sendto=44 recvfrom=45
    sendmsg=46 recvmsg=47 sendmmsg=307 recvmmsg=299 shutdown=48 getsockname=51 getpeername=52 setsockopt=54
    getsockopt=55 execve=59 execveat=322 fork=57 vfork=58 setrlimit=160
"""
X86_64_KILL = """
    tkill=200 rt_sigqueueinfo=129 rt_tgsigqueueinfo=297 pidfd_open=434 pidfd_send_signal=424 pidfd_getfd=438
    ptrace=101 process_vm_readv=310 process_vm_writev=311 process_madvise=440 process_mrelease=448 kcmp=312
    keyctl=250 add_key=248 request_key=249 bpf=321 perf_event_open=298 userfaultfd=323 mount=165 umount2=166
    pivot_root=155 chroot=161 unshare=272 setns=308 open_tree=428 move_mount=429 fsopen=430 fsconfig=431
    fsmount=432 fspick=433 mount_setattr=442 io_uring_setup=425 io_uring_enter=426 io_uring_register=427
    kexec_load=246 kexec_file_load=320 init_module=175 finit_module=313 delete_module=176 reboot=169
    swapon=167 swapoff=168
"""
X86_64_SPECIAL = """
    kill=62 tgkill=234 prlimit64=302 clone=56 clone3=435
"""
AARCH64_ALLOW = """
    read=63 write=64 readv=65 writev=66 pread64=67 pwrite64=68 preadv=69 pwritev=70 preadv2=286 pwritev2=287
    lseek=62 close=57 close_range=436 openat=56 openat2=437 fstat=80 statx=291 statfs=43 fstatfs=44
    faccessat=48 faccessat2=439 readlinkat=78 getdents64=61 getcwd=17 chdir=49 fchdir=50 mkdirat=34
    unlinkat=35 renameat=38 renameat2=276 umask=166 utimensat=88 truncate=45 ftruncate=46 fallocate=47
    fsync=82 fdatasync=83 flock=32 fcntl=25 ioctl=29 fadvise64=223 readahead=213 sendfile=71
    copy_file_range=285 pipe2=59 dup=23 dup3=24 ppoll=73 pselect6=72 epoll_create1=20 epoll_ctl=21
    epoll_pwait=22 epoll_pwait2=441 eventfd2=19 timerfd_create=85 timerfd_settime=86 timerfd_gettime=87
    mmap=222 munmap=215 mprotect=226 mremap=216 brk=214 madvise=233 mincore=232 msync=227 membarrier=283
    get_mempolicy=236 futex=98 futex_waitv=449 set_robust_list=99 set_tid_address=96 rseq=293 sched_yield=124
    sched_getaffinity=123 sched_getparam=121 sched_getscheduler=120 sched_get_priority_max=125
    sched_get_priority_min=126 getpriority=141 nanosleep=101 clock_nanosleep=115 clock_gettime=113
    clock_getres=114 gettimeofday=169 getitimer=102 setitimer=103 timer_create=107 timer_settime=110
    timer_gettime=108 timer_getoverrun=109 timer_delete=111 rt_sigaction=134 rt_sigprocmask=135
    rt_sigreturn=139 rt_sigpending=136 rt_sigtimedwait=137 rt_sigsuspend=133 sigaltstack=132
    restart_syscall=128 getpid=172 getppid=173 gettid=178 getuid=174 geteuid=175 getgid=176 getegid=177
    getgroups=158 getresuid=148 getresgid=150 getpgid=155 getsid=156 uname=160 sysinfo=179 times=153
    getrusage=165 getrlimit=163 getcpu=168 getrandom=278 capget=90 exit=93 exit_group=94 wait4=260 waitid=95
    newfstatat=79 futex_wake=454 futex_wait=455 futex_requeue=456
"""
AARCH64_DENY = """
    socket=198 connect=203 accept=202 accept4=242 bind=200 listen=201 socketpair=199 sendto=206 recvfrom=207
    sendmsg=211 recvmsg=212 sendmmsg=269 recvmmsg=243 shutdown=210 getsockname=204 getpeername=205
    setsockopt=208 getsockopt=209 execve=221 execveat=281 setrlimit=164
"""
AARCH64_KILL = """
    tkill=130 rt_sigqueueinfo=138 rt_tgsigqueueinfo=240 pidfd_open=434 pidfd_send_signal=424 pidfd_getfd=438
    ptrace=117 process_vm_readv=270 process_vm_writev=271 process_madvise=440 process_mrelease=448 kcmp=272
    keyctl=219 add_key=217 request_key=218 bpf=280 perf_event_open=241 userfaultfd=282 mount=40 umount2=39
    pivot_root=41 chroot=51 unshare=97 setns=268 open_tree=428 move_mount=429 fsopen=430 fsconfig=431
    fsmount=432 fspick=433 mount_setattr=442 io_uring_setup=425 io_uring_enter=426 io_uring_register=427
    kexec_load=104 kexec_file_load=294 init_module=105 finit_module=273 delete_module=106 reboot=142
    swapon=224 swapoff=225
"""
AARCH64_SPECIAL = """
    kill=129 tgkill=131 prlimit64=261 clone=220 clone3=435
"""


def table(machine: str, group: str) -> dict[str, int]:
    text = globals()[f"{machine.upper()}_{group}"]
    return {name: int(number) for name, number in (item.split("=") for item in text.split())}


MACHINES = ("x86_64", "aarch64")
