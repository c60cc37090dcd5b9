"""The namespaces of a sandboxed child, built on bubblewrap (``bwrap``): no network
interface but loopback (its own, empty), its own PID, IPC and UTS namespaces, no
capabilities, and a file system made only of:

- the system's programs and libraries, read-only (``/usr`` and its links);
- the Python installation and every folder on the parent's ``sys.path``, read-only,
  except one that holds a protected path (the server's home: its database, blobs, keys);
- the work's scratch folder, writable, at ``/sandbox`` (its working directory), with
  the folders the work must not change bound read-only over it;
- a private ``/tmp`` (a tmpfs of a fixed size), ``/proc`` (its own PID namespace: no
  process of the server's is in it) and a minimal ``/dev``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SCRATCH = "/sandbox"
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PROBE = (sys.executable, "-m", "modelport.sandbox.launch", "--", "modelport.sandbox.types")
"""What the probe runs inside: the launcher, on a module that does nothing."""
DEFAULT_TMP_BYTES = 64 << 20
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")


@functools.cache
def usable(bwrap: str) -> str | None:
    """The path of ``bwrap`` when it can make the namespaces on this machine, else None
    (not installed, or the kernel or the container forbids them)."""
    path = shutil.which(bwrap)
    if path is None:
        return None
    python = [arg for entry in python_paths(()) for arg in ("--ro-bind", entry, entry)]
    probe = [path, *_namespaces(), *_system(), *python, *PROBE]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, env={}, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if done.returncode == 0 else None


def _namespaces() -> list[str]:
    return ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]


def _system(tmp_bytes: int = DEFAULT_TMP_BYTES) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for link in _SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for path in _ETC:
        args += ["--ro-bind-try", path, path]
    args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]


def python_paths(protect: Sequence[Path]) -> list[str]:
    """The folders the child's Python needs (the installation and the parent's
    ``sys.path``), without any that would show a protected path."""
    guarded = [p.resolve() for p in protect]
    found: list[str] = []
    for entry in [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]:
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        path = Path(entry).resolve()
        if path == Path("/") or any(_overlap(path, g) for g in guarded):
            continue
        if str(path) not in found:
            found.append(str(path))
    return found


def _overlap(path: Path, guarded: Path) -> bool:
    """Whether binding ``path`` would show ``guarded`` or a part of it."""
    return path == guarded or path in guarded.parents or guarded in path.parents


def command(
    bwrap: str,
    argv: Sequence[str],
    *,
    scratch: Path,
    readonly: Sequence[Path],
    python: Sequence[str],
    tmp_bytes: int = DEFAULT_TMP_BYTES,
    shared: Sequence[Path] = (),
) -> list[str]:
    """``argv`` run by ``bwrap`` in the namespaces above; ``readonly`` are folders inside
    ``scratch`` the child may read but not change; ``shared`` are files elsewhere it may
    read at their own paths (and nothing else of their folders); ``/tmp`` holds
    ``tmp_bytes``."""
    args = [bwrap, *_namespaces(), *_system(tmp_bytes)]
    for entry in python:
        args += ["--ro-bind", entry, entry]
    for path in shared:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(scratch), SCRATCH]
    for folder in readonly:
        inside = Path(SCRATCH) / folder.resolve().relative_to(scratch.resolve())
        args += ["--ro-bind", str(folder), str(inside)]
    return [*args, "--chdir", SCRATCH, *argv]
