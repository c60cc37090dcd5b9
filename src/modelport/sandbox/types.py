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
    """Run without namespaces, explicitly: an empty environment, limits, and the
    system-call filter where libseccomp is present, but the file system and network
    are the server's. For a machine that runs only its owner's models."""


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
    """Address space; an allocation past it fails."""
    open_files: int = 256


@dataclass(frozen=True, slots=True)
class Confinement:
    """How a child was confined, for reports and metrics."""

    isolation: Isolation
    seccomp: bool
    """Process creation and network sockets refused by a system-call filter."""

    @property
    def network(self) -> str:
        return "none" if self.isolation is Isolation.BUBBLEWRAP else "host"

    def as_dict(self) -> dict[str, object]:
        return {
            "isolation": self.isolation.value,
            "seccomp": self.seccomp,
            "network": self.network,
            "environment": "empty",
            "filesystem": (
                "read-only view, private scratch"
                if self.isolation is Isolation.BUBBLEWRAP
                else "host"
            ),
        }
