"""The system-call filter of a sandboxed child, built with libseccomp (through the
``pyseccomp`` bindings): an allow-list, every other call failing with EPERM.

What is allowed is what Python, numpy, ONNX Runtime, torch, tokenizers and safetensors
need to compute on files and memory (in the spirit of Docker's default profile, with
less): files, memory, threads, signals to itself, clocks, polling, Unix sockets. Among
what is refused: process creation and programs (``fork``, ``execve``, ``clone`` but
threads), network sockets (any family but ``AF_UNIX``), ``ptrace`` and reading other
processes' memory, namespaces (``unshare``, ``setns``, ``mount``), ``io_uring``, ``bpf``,
``perf_event_open``, ``userfaultfd``, the kernel keyring, modules, and signalling or
changing the limits of any process but itself.

``clone3`` fails with ENOSYS instead, which makes the C library fall back to ``clone``,
whose flags the filter can read. A call of another architecture's ABI kills the child
(libseccomp's default)."""

from __future__ import annotations

import ctypes
import errno
import functools
import importlib.util
import os
import socket
from typing import Any

ALLOWED = (
    # files and folders
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
    "preadv2", "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range",
    "lseek", "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs",
    "access", "faccessat", "faccessat2", "getdents", "getdents64", "readlink",
    "readlinkat", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink",
    "symlinkat", "chmod", "fchmod", "fchmodat", "utime", "utimes", "utimensat",
    "futimesat", "umask", "truncate", "ftruncate", "fallocate", "fsync", "fdatasync",
    "sync_file_range", "fadvise64", "readahead", "flock", "fcntl", "dup", "dup2", "dup3",
    "pipe", "pipe2", "sendfile", "copy_file_range", "splice", "tee", "ioctl",
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync",
    "membarrier", "memfd_create", "mbind", "get_mempolicy", "set_mempolicy",
    # threads and synchronisation
    "set_tid_address", "set_robust_list", "rseq", "futex", "futex_waitv", "arch_prctl",
    "map_shadow_stack", "prctl", "gettid", "sched_yield", "sched_getaffinity",
    "sched_setaffinity", "sched_getparam", "sched_getscheduler", "sched_getattr",
    "sched_get_priority_max", "sched_get_priority_min", "getcpu", "exit", "exit_group",
    "restart_syscall",
    # signals (sent to itself only: see the rules below)
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
    "rt_sigtimedwait", "sigaltstack", "signalfd", "signalfd4", "pause", "alarm",
    "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
    "timer_getoverrun", "timer_delete",
    # clocks, waiting, polling
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
    "time", "times", "select", "pselect6", "poll", "ppoll", "epoll_create",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
    "eventfd2", "timerfd_create", "timerfd_settime", "timerfd_gettime",
    # Unix sockets (the family is checked at socket() and socketpair(): below)
    "connect", "bind", "listen", "accept", "accept4", "sendto", "recvfrom", "sendmsg",
    "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "getsockname", "getpeername",
    "setsockopt", "getsockopt",
    # who and where it is
    "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "getpgid", "getpgrp", "getsid", "uname", "sysinfo",
    "getrandom", "getrlimit", "setrlimit", "getrusage", "getpriority", "capget",
)  # fmt: skip
"""Allowed whatever their arguments (names unknown on this architecture are skipped)."""

_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
_NO_SCMP_SYSCALL = -1


def _bindings() -> Any | None:
    try:
        import pyseccomp
    except (ImportError, OSError):  # not installed, or libseccomp is missing
        return None
    return pyseccomp


@functools.cache
def available() -> bool:
    """Whether a child here can load the filter: the bindings are installed and
    libseccomp loads. (Importing the bindings runs ``ldconfig``, so the parent checks
    without importing them.)"""
    if importlib.util.find_spec("pyseccomp") is None:
        return False
    try:
        ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return False
    return True


def install() -> None:
    """Load the filter into this process (and every thread it starts from now on).
    Irreversible; raises when the filter cannot be loaded.

    The rules that name a process take this process's id now: the filter is loaded by
    the process that runs the work, which can start no other."""
    sc = _bindings()
    if sc is None:
        raise RuntimeError("libseccomp or its Python bindings are not installed")
    rules = sc.SyscallFilter(defaction=sc.ERRNO(errno.EPERM))
    allow = sc.ALLOW
    for name in ALLOWED:
        number = sc.resolve_syscall(sc.Arch.NATIVE, name)
        if number >= 0:  # negative: not a call of this architecture (or of this libseccomp)
            rules.add_rule(allow, number)
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # A thread (CLONE_THREAD) in no new namespace; any other clone makes a process.
    mask = _CLONE_THREAD | _CLONE_NAMESPACES
    rules.add_rule(allow, "clone", sc.Arg(0, sc.MASKED_EQ, mask, _CLONE_THREAD))
    # Allow-list comparisons: a value with high bits set (which the kernel truncates)
    # matches nothing and is refused.
    rules.add_rule(allow, "socket", sc.Arg(0, sc.EQ, socket.AF_UNIX))
    rules.add_rule(allow, "socketpair", sc.Arg(0, sc.EQ, socket.AF_UNIX))
    me = os.getpid()
    for target in (0, me):  # 0: its own process group (it leads its own session)
        rules.add_rule(allow, "kill", sc.Arg(0, sc.EQ, target))
        rules.add_rule(allow, "prlimit64", sc.Arg(0, sc.EQ, target))
    rules.add_rule(allow, "tgkill", sc.Arg(0, sc.EQ, me))
    rules.load()
