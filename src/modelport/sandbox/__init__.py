"""The sandbox: a child process that runs other people's work (validation, publishers'
pre- and post-processing, model hosts: ``runtime.process.launching``) with nothing of
the server's.

- ``types``: the isolation a sandbox got and the limits it runs under (plain data);
- ``bubblewrap``: the namespaces, built on bubblewrap (no network interface, a
  read-only view of what the work needs, a private scratch folder, its own PID space);
- ``cgroups``: a capped cgroup of each child's own (memory, CPU share, processes),
  v2 or v1, where the host lets the server make them (``proctree``: what ``/proc``
  tells where it does not);
- ``seccomp``: the system-call filter (an allow-list: no process creation, no network
  sockets, no ptrace, namespaces, io_uring, bpf...), built on libseccomp;
- ``privileges``: the server non-dumpable, the child without capabilities;
- ``launch``: the child's first step (limits, capabilities dropped, then the filter,
  then the work);
- ``spawn``: the parent's side, which chooses the isolation and fails closed;
- ``cancel``: a cancellation from any thread that kills a running child;
- ``warm``: long-lived children answering framed calls (``frames``) by a deadline, in
  pools; ``processing_worker`` and ``processing_code``: such a child running a version's
  processing code.
"""

from modelport.sandbox.spawn import Finished, Sandbox, SandboxUnavailable
from modelport.sandbox.types import (
    UNISOLATED_DOES_NOT_PROTECT,
    UNISOLATED_PROTECTS,
    Caps,
    Confinement,
    Enforcement,
    Isolation,
    Limits,
    SandboxMode,
)


def isolation_available(bwrap: str = "bwrap") -> bool:
    """Whether bubblewrap can isolate a child on this machine."""
    from modelport.sandbox.bubblewrap import usable

    return usable(bwrap) is not None


__all__ = [
    "UNISOLATED_DOES_NOT_PROTECT",
    "UNISOLATED_PROTECTS",
    "Caps",
    "Confinement",
    "Enforcement",
    "Finished",
    "Isolation",
    "Limits",
    "Sandbox",
    "SandboxMode",
    "SandboxUnavailable",
    "isolation_available",
]
