"""The sandbox: a child process that runs other people's work (validation, publishers'
pre- and post-processing) with nothing of the server's.

- ``types``: the isolation a sandbox got and the limits it runs under (plain data);
- ``bubblewrap``: the namespaces, built on bubblewrap (no network interface, a
  read-only view of what the work needs, a private scratch folder, its own PID space);
- ``seccomp``: the system-call filter (no process creation, no network sockets),
  built on libseccomp;
- ``launch``: the child's first step (limits, then the filter, then the work);
- ``spawn``: the parent's side, which chooses the isolation and fails closed;
- ``warm``: long-lived children answering framed calls (``frames``) by a deadline, in
  pools; ``processing_worker`` and ``processing_code``: such a child running a version's
  processing code.
"""

from modelport.sandbox.spawn import Finished, Sandbox, SandboxUnavailable
from modelport.sandbox.types import Confinement, Isolation, Limits, SandboxMode


def isolation_available(bwrap: str = "bwrap") -> bool:
    """Whether bubblewrap can isolate a child on this machine."""
    from modelport.sandbox.bubblewrap import usable

    return usable(bwrap) is not None


__all__ = [
    "Confinement",
    "Finished",
    "Isolation",
    "Limits",
    "Sandbox",
    "SandboxMode",
    "SandboxUnavailable",
    "isolation_available",
]
