"""Control groups of sandboxed children: each child (a validation run, a warm processing
worker) gets a cgroup of its own, capped in resident memory, CPU share and processes,
for the whole group it makes (bubblewrap, the launcher, whatever the work starts).

``detect`` finds, once at start-up, what this host lets the server write:

- cgroup v2: a delegated subtree (``root``, else the server's own cgroup when its
  parent enables ``memory``, ``cpu`` and ``pids`` for it); one child per run,
  ``memory.max`` (and ``memory.swap.max`` 0), ``cpu.max``, ``pids.max``;
- cgroup v1: the ``memory``, ``cpu``, ``cpuacct`` and ``pids`` hierarchies, writable
  (the server's own group in each, or ``root`` inside each hierarchy);
  ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes``),
  ``cpu.cfs_quota_us``/``cpu.cfs_period_us``, ``pids.max``;
- else none (``Unconfined``): the children keep their resource limits only, and
  ``Cgroups.reason`` says why.

Call order: ``detect`` once; ``Cgroups.create(limits)`` before each child; the child's
first process writes its own pid into every ``Cgroup.procs`` file before it runs
anything else (``enter``); ``Cgroup.remove`` once it has ended (it kills what is left
of the group first); ``Cgroups.close`` when the server stops.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from modelport.sandbox.types import Enforcement, Limits

_PERIOD_US = 100_000
_V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")
_V2_CONTROLLERS = ("memory", "cpu", "pids")
_PREFIX = "modelport-"
_NAMES = itertools.count(1)
"""Children's group names, unique in this process (every ``Hierarchies`` of it shares
the server's folder)."""
_ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class Cgroup(Protocol):
    """One child's cgroup."""

    procs: tuple[Path, ...]
    """The files the child's first process writes its pid to (one per hierarchy)."""

    def cpu_seconds(self) -> float:
        """CPU time of the whole group so far."""
        ...

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the group at its memory cap."""
        ...

    def remove(self) -> None:
        """Kill what is left in the group and remove it (idempotent)."""
        ...


class Cgroups(Protocol):
    """Where children's cgroups are made; ``enforcement`` names the mechanism."""

    enforcement: Enforcement
    reason: str
    """Why there is no cgroup (empty where there is one)."""

    def create(self, limits: Limits) -> Cgroup | None:
        """A new capped cgroup for one child (None: no cgroup here); raises ``OSError``
        where it cannot be made."""
        ...

    def close(self) -> None:
        """Remove the server's folder of cgroups (the children have ended)."""
        ...


def enter(cgroup: Cgroup | None, argv: Sequence[str]) -> list[str]:
    """``argv`` run by a shell that first moves itself into ``cgroup``: everything the
    child runs is in it from its first instruction (the parent moving a started process
    would race with what it forks)."""
    if cgroup is None:
        return list(argv)
    return ["/bin/sh", "-c", _ENTER, "sh", *map(str, cgroup.procs), "--", *argv]


class Unconfined:
    """No cgroup: the resource limits alone."""

    enforcement = Enforcement.RLIMITS

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def create(self, limits: Limits) -> Cgroup | None:
        return None

    def close(self) -> None:
        pass


class _Group:
    """A child's cgroup in one or more hierarchies (one for v2, one per controller v1)."""

    def __init__(
        self, folders: Mapping[str, Path], v2: bool, leave: Callable[[Path], None]
    ) -> None:
        self.folders = dict(folders)
        self.v2 = v2
        self._leave = leave
        self.procs = tuple(dict.fromkeys(f / "cgroup.procs" for f in self.folders.values()))
        self._removed = False

    def cpu_seconds(self) -> float:
        try:
            if self.v2:
                stat = _fields(self.folders["cpu"] / "cpu.stat")
                return stat.get("usage_usec", 0) / 1e6
            return int((self.folders["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return 0.0

    def oom_killed(self) -> bool:
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            return _fields(self.folders["memory"] / name).get("oom_kill", 0) > 0
        except OSError:
            return False

    def remove(self) -> None:
        if self._removed:
            return
        self._removed = True
        for folder in dict.fromkeys(self.folders.values()):
            _kill_all(folder)
            if not _rmdir(folder):
                self._leave(folder)


class Hierarchies:
    """cgroups under the server's own folder (``modelport-<pid>``) in each of ``bases``
    (controller → folder; one folder for v2)."""

    def __init__(self, bases: Mapping[str, Path], enforcement: Enforcement) -> None:
        self.enforcement = enforcement
        self.reason = ""
        self.v2 = enforcement is Enforcement.CGROUP2
        self.folders = {name: base / f"{_PREFIX}{os.getpid()}" for name, base in bases.items()}
        self._lock = threading.Lock()
        self._left: list[Path] = []
        """Groups whose killed processes were not yet gone at ``remove``: retried."""
        for base in dict.fromkeys(bases.values()):
            _remove_stale(base)
        try:
            for folder in dict.fromkeys(self.folders.values()):
                folder.mkdir(exist_ok=True)
                if self.v2:
                    _enable(folder, _V2_CONTROLLERS)
        except OSError:
            self.close()
            raise

    def create(self, limits: Limits) -> Cgroup:
        with self._lock:
            name = str(next(_NAMES))
            left, self._left[:] = list(self._left), []
        for folder in left:
            if not _rmdir(folder):
                self._leave(folder)
        folders = {c: f / name for c, f in self.folders.items()}
        made: list[Path] = []
        try:
            for folder in dict.fromkeys(folders.values()):
                folder.mkdir()
                made.append(folder)
            self._write_limits(folders, limits)
        except OSError:
            for folder in made:
                _rmdir(folder)
            raise
        return _Group(folders, self.v2, self._leave)

    def _leave(self, folder: Path) -> None:
        with self._lock:
            self._left.append(folder)

    def _write_limits(self, folders: Mapping[str, Path], limits: Limits) -> None:
        # 0 (memory, CPU) is no cap: a model host's memory is admitted by its host, and
        # its threads may use every core.
        quota = max(1000, int(limits.cpu_cores * _PERIOD_US)) if limits.cpu_cores > 0 else None
        memory_cap = limits.memory_bytes if limits.memory_bytes > 0 else None
        if self.v2:
            folder = folders["memory"]
            (folder / "memory.max").write_text(str(memory_cap or "max"))
            if memory_cap is not None:
                with contextlib.suppress(FileNotFoundError):  # no swap accounting
                    (folder / "memory.swap.max").write_text("0")
            (folder / "cpu.max").write_text(f"{quota or 'max'} {_PERIOD_US}")
            (folder / "pids.max").write_text(str(limits.processes))
            return
        if memory_cap is not None:
            memory = folders["memory"]
            (memory / "memory.limit_in_bytes").write_text(str(memory_cap))
            with contextlib.suppress(FileNotFoundError):  # no swap accounting
                (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_cap))
        (folders["cpu"] / "cpu.cfs_period_us").write_text(str(_PERIOD_US))
        (folders["cpu"] / "cpu.cfs_quota_us").write_text(str(quota or -1))
        (folders["pids"] / "pids.max").write_text(str(limits.processes))

    def close(self) -> None:
        for folder in dict.fromkeys(self.folders.values()):
            for child in _children(folder):
                _kill_all(child)
                _rmdir(child)
            _rmdir(folder)


def detect(
    setting: str = "auto", root: Path | None = None, *, proc: Path = Path("/proc")
) -> Cgroups:
    """What caps children on this host (see the module's docstring); ``setting`` is
    ``auto`` or ``off``."""
    if setting == "off":
        return Unconfined("MODELPORT_SANDBOX_CGROUP is off")
    mounts = _mounts(proc / "self" / "mounts")
    own = _own_groups(proc / "self" / "cgroup")
    problems: list[str] = []
    v2_base: Path | None = None
    if root is not None and (root / "cgroup.controllers").is_file():
        v2_base = root
    elif root is None and "" in mounts:
        v2_base = _inside(mounts[""], own.get("", "/"))
    if v2_base is not None:
        try:
            return _probe(Hierarchies({c: v2_base for c in _V2_CONTROLLERS}, Enforcement.CGROUP2))
        except OSError as exc:
            problems.append(f"cgroup v2 at {v2_base}: {exc.strerror or exc}")
    if all(c in mounts for c in _V1_CONTROLLERS):
        bases = {
            c: _inside(mounts[c], str(root) if root is not None else own.get(c, "/"))
            for c in _V1_CONTROLLERS
        }
        try:
            return _probe(Hierarchies(bases, Enforcement.CGROUP1))
        except OSError as exc:
            problems.append(f"cgroup v1: {exc.strerror or exc}")
    elif not problems:
        problems.append("no cgroup v2 subtree and no v1 memory, cpu, cpuacct and pids hierarchies")
    return Unconfined("; ".join(problems))


def _probe(hierarchies: Hierarchies) -> Hierarchies:
    """``hierarchies`` once a capped group could be made there and removed."""
    try:
        hierarchies.create(Limits(wall_seconds=1, cpu_seconds=1, memory_bytes=64 << 20)).remove()
    except OSError:
        hierarchies.close()
        raise
    return hierarchies


def _inside(mount: Path, group: str) -> Path:
    return mount / group.lstrip("/")


def _mounts(path: Path) -> dict[str, Path]:
    """Mount point by controller (``""``: the v2 hierarchy, when it has controllers)."""
    found: dict[str, Path] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        where = Path(parts[1].replace("\\040", " "))
        if parts[2] == "cgroup2":
            try:
                controllers = (where / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if all(c in controllers for c in _V2_CONTROLLERS):
                found.setdefault("", where)
        elif parts[2] == "cgroup":
            for option in parts[3].split(","):
                if option in _V1_CONTROLLERS:
                    found.setdefault(option, where)
    return found


def _own_groups(path: Path) -> dict[str, str]:
    """This process's group by controller (``""``: v2)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            _, controllers, group = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = group
    return found


def _enable(folder: Path, controllers: Sequence[str]) -> None:
    """Give ``folder``'s children ``controllers`` (v2)."""
    enabled = (folder / "cgroup.subtree_control").read_text().split()
    missing = [c for c in controllers if c not in enabled]
    if missing:
        (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))


def _fields(path: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            found[key] = int(value)
    return found


def _kill_all(folder: Path) -> None:
    kill = folder / "cgroup.kill"
    if kill.is_file():
        with contextlib.suppress(OSError):
            kill.write_text("1")
            return
    with contextlib.suppress(OSError):
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


def _rmdir(folder: Path) -> bool:
    """Remove an emptied cgroup; False while its killed processes are not yet gone."""
    try:
        folder.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
            return False
        raise
    return True


def _children(folder: Path) -> list[Path]:
    try:
        return [c for c in folder.iterdir() if c.is_dir()]
    except OSError:
        return []


def _remove_stale(base: Path) -> None:
    """Remove the folders of servers that are gone (their pid no longer runs)."""
    for folder in _children(base):
        name = folder.name
        if not name.startswith(_PREFIX) or not name[len(_PREFIX) :].isdigit():
            continue
        pid = int(name[len(_PREFIX) :])
        if pid == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        with contextlib.suppress(OSError):
            for child in _children(folder):
                _kill_all(child)
                child.rmdir()
            folder.rmdir()
