"""The system-call filter of a sandboxed child, built with libseccomp (through the
``pyseccomp`` bindings): the child may run threads, but not create processes or run
programs, and may open no network socket (Unix sockets stay: some runtimes use them
between their own threads).

Refused calls fail with EPERM (``clone3`` with ENOSYS, which makes the C library fall
back to ``clone``, whose flags the filter can read)."""

from __future__ import annotations

import ctypes
import errno
import functools
import importlib.util
import socket
from typing import Any

_CLONE_THREAD = 0x00010000
_DENIED_CALLS = ("fork", "vfork", "execve", "execveat")
_DENIED_FAMILIES = (socket.AF_INET, socket.AF_INET6, socket.AF_PACKET, socket.AF_NETLINK)


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
    Irreversible; raises when the filter cannot be loaded."""
    sc = _bindings()
    if sc is None:
        raise RuntimeError("libseccomp or its Python bindings are not installed")
    rules = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in _DENIED_CALLS:
        rules.add_rule(sc.ERRNO(errno.EPERM), name)
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # clone without CLONE_THREAD makes a process; with it, a thread (allowed).
    rules.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    for family in _DENIED_FAMILIES:
        rules.add_rule(sc.ERRNO(errno.EPERM), "socket", sc.Arg(0, sc.EQ, family))
        rules.add_rule(sc.ERRNO(errno.EPERM), "socketpair", sc.Arg(0, sc.EQ, family))
    rules.load()
