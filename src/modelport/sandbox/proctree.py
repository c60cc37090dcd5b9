"""What ``/proc`` tells of processes where no cgroup does: the tasks a user runs (for
``RLIMIT_NPROC``, which counts them all) and the CPU time of a process with everything
it started. Linux only; a process that ends while it is read is skipped."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _pids(proc: Path) -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []


def tasks_of(uid: int, proc: Path = Path("/proc")) -> int:
    """Processes and threads whose real user is ``uid``."""
    total = 0
    for pid in _pids(proc):
        try:
            status = (proc / str(pid) / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        try:
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (KeyError, ValueError, IndexError):
            continue
    return total


def _stat(proc: Path, pid: int) -> tuple[int, float] | None:
    """Parent pid and CPU seconds (user and system, every thread) of ``pid``."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its end.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS
    except (IndexError, ValueError):
        return None


def descendants(root: int, proc: Path = Path("/proc")) -> list[int]:
    """``root`` and its living descendants."""
    parents: dict[int, int] = {}
    for pid in _pids(proc):
        found = _stat(proc, pid)
        if found is not None:
            parents[pid] = found[0]
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found_pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        found_pids.append(pid)
        todo.extend(children.get(pid, ()))
    return found_pids


class Tree:
    """A long-lived child and what it started: its processes are found once (the
    system-call filter lets it start no more), then only theirs are read."""

    def __init__(self, root: int, proc: Path = Path("/proc")) -> None:
        self.root = root
        self.proc = proc
        self._pids: list[int] | None = None

    def cpu_seconds(self) -> float:
        if self._pids is None:
            self._pids = descendants(self.root, self.proc)
        total = 0.0
        for pid in self._pids:
            found = _stat(self.proc, pid)
            if found is not None:
                total += found[1]
        return total
