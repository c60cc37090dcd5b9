"""Plain records of the sandbox: the operator's mode, the isolation a child got, and the
limits it runs under."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SandboxMode(StrEnum):
    """What the operator asks for (setting ``sandbox``)."""

    AUTO = "auto"
    """Bubblewrap when it works on this machine; otherwise refuse to run (fail closed)."""
    BUBBLEWRAP = "bubblewrap"
    """Bubblewrap, or refuse."""
    UNISOLATED = "unisolated"
    """Run without namespaces, explicitly: an empty environment, limits, no
    capabilities, and the system-call filter where libseccomp is present, but the file
    system, ``/proc`` and network are the server's. For a machine that runs only its
    owner's models."""


UNISOLATED_PROTECTS = (
    "an empty environment; this process's environment and memory (not dumpable; the "
    "child has no capability); the system-call filter (no process, no network socket, "
    "no ptrace, no signal to another process); CPU, memory, file-size and open-file limits"
)
"""What ``unisolated`` still gives a child, as the server says at start-up."""

UNISOLATED_DOES_NOT_PROTECT = (
    "the file system (the child reads and writes whatever this user can: the home, "
    "database, blobs, keys, /tmp), /proc (other processes of this user, their "
    "command lines; their environments where they are dumpable), Unix sockets of the "
    "machine (abstract and on disk); do not run other people's models in this mode"
)
"""What ``unisolated`` does not protect, as the server says at start-up."""


class Enforcement(StrEnum):
    """What holds a child to its memory, CPU and process caps (detected at start-up,
    ``modelport.sandbox.cgroups``)."""

    CGROUP2 = "cgroup2"
    """A cgroup v2 of its own (``memory.max``, ``cpu.max``, ``pids.max``), under the
    delegated subtree, on top of the resource limits."""
    CGROUP1 = "cgroup1"
    """A cgroup of its own in the v1 ``memory``, ``cpu``, ``cpuacct`` and ``pids``
    hierarchies (``memory.limit_in_bytes``, ``cpu.cfs_quota_us``, ``pids.max``), on top of
    the resource limits."""
    RLIMITS = "rlimits"
    """The resource limits of the process alone (``RLIMIT_AS``, ``RLIMIT_CPU``,
    ``RLIMIT_NPROC``...): no cap on the group's resident memory or its CPU share."""


class Isolation(StrEnum):
    """What a child actually got."""

    BUBBLEWRAP = "bubblewrap"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one child."""

    wall_seconds: float
    """Killed with its process group when this has passed."""
    cpu_seconds: int
    """CPU time; the kernel stops the child past it (SIGXCPU, then SIGKILL)."""
    memory_bytes: int
    """Address space; an allocation past it fails. Under a cgroup, also the resident
    memory of its whole group (its private ``/tmp`` included): past it the kernel kills
    it (SIGKILL)."""
    open_files: int = 256
    file_bytes: int = 1 << 30
    """Largest file it may write (``RLIMIT_FSIZE``); a write past it fails (EFBIG)."""
    tmp_bytes: int = 64 << 20
    """Size of its private ``/tmp`` (memory-backed) under bubblewrap; a write past it
    fails (ENOSPC). Unisolated, ``/tmp`` is the machine's."""
    cpu_cores: float = 2.0
    """CPU share of its whole group under a cgroup (``cpu.max``): throttled past it."""
    processes: int = 512
    """Processes and threads of its whole group (``pids.max`` under a cgroup, else
    ``RLIMIT_NPROC`` counted above what its user already runs): one more fails (EAGAIN)."""


@dataclass(frozen=True, slots=True)
class Caps:
    """The operator's caps of every child (settings ``sandbox_*``); what a run adds to
    them (its time and memory) makes its ``Limits``."""

    tmp_bytes: int = 64 << 20
    file_bytes: int = 1 << 30
    cpu_cores: float = 2.0
    processes: int = 512

    def limits(self, *, wall_seconds: float, cpu_seconds: int, memory_bytes: int) -> Limits:
        return Limits(
            wall_seconds=wall_seconds,
            cpu_seconds=cpu_seconds,
            memory_bytes=memory_bytes,
            file_bytes=self.file_bytes,
            tmp_bytes=self.tmp_bytes,
            cpu_cores=self.cpu_cores,
            processes=self.processes,
        )


@dataclass(frozen=True, slots=True)
class Confinement:
    """How a child was confined, for reports and metrics."""

    isolation: Isolation
    seccomp: bool
    """Process creation and network sockets refused by a system-call filter."""
    enforcement: Enforcement = Enforcement.RLIMITS
    """What holds it to its memory, CPU and process caps."""

    @property
    def network(self) -> str:
        return "none" if self.isolation is Isolation.BUBBLEWRAP else "host"

    def as_dict(self) -> dict[str, object]:
        return {
            "isolation": self.isolation.value,
            "seccomp": self.seccomp,
            "network": self.network,
            "environment": "empty",
            "limits": self.enforcement.value,
            "filesystem": (
                "read-only view, private scratch"
                if self.isolation is Isolation.BUBBLEWRAP
                else "host"
            ),
        }
