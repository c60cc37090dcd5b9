"""What keeps the server's memory and environment out of a child's reach, on both sides.

- ``protect_parent``: the server makes itself non-dumpable (``PR_SET_DUMPABLE`` 0)
  before its first child: ``/proc/<server>/environ``, ``mem`` and ``maps`` then open
  only for a process holding ``CAP_SYS_PTRACE``, and no core file is written.
- ``drop_capabilities``: the child gives up every capability (bounding set, ambient,
  effective, permitted, inheritable) before the system-call filter: a child of a server
  that runs as root keeps root's user id but none of its powers (reading a
  non-dumpable process, overriding file permissions).

Linux only; elsewhere both do nothing (and the sandbox cannot isolate anyway).
"""

from __future__ import annotations

import ctypes
import functools
import sys

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAPABILITY = 63


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def protect_parent() -> bool:
    """Make this process non-dumpable (once); whether it is now."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)


def drop_capabilities() -> None:
    """Give up every capability of this process, for good; raises ``OSError`` when the
    effective, permitted and inheritable sets cannot be emptied."""
    libc = _libc()
    if libc is None:
        return
    # Without CAP_SETPCAP (any unprivileged child) these fail, and there is nothing to drop.
    for capability in range(_LAST_CAPABILITY + 1):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()  # all zero
    if libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot drop capabilities: {code}")
