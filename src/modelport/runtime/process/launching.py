"""How a worker process is started: with nothing of the server's.

``WorkerLauncher`` is what ``runtime.process.client.Worker`` asks for a process;
``SandboxLauncher`` starts it through the sandbox (``modelport.sandbox``): a clean exec
of a new interpreter whose environment is empty but for an allow-list (where Python
finds its packages, the locale, the thread-count variables), its working directory a
private scratch folder, its standard input closed, the server non-dumpable, no
capability, the system-call filter where libseccomp is present, and, where the mode is
``bubblewrap`` or ``auto``, bubblewrap's namespaces: a read-only view of the
interpreter and of the version's files only, no network, private ``/proc`` and
``/tmp``. The worker learns what to load from its control socket, never from its
environment; segments reach it as descriptors, so it needs no ``/dev/shm``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from modelport.sandbox import Limits, Sandbox, SandboxMode
from modelport.sandbox.cgroups import Cgroup

WORKER_MODULE = "modelport.runtime.process.worker"
GENERATIVE_WORKER_MODULE = "modelport.runtime.process.generative_worker"

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
"""The server's own variables a worker is given (when set): how many threads a native
library may start. Nothing else of the server's environment reaches it."""

HOST_LIMITS = Limits(
    wall_seconds=0.0,  # a long-lived process: its host kills it (deadline, unload)
    cpu_seconds=0,
    memory_bytes=0,  # the host's memory admission measures it instead
    open_files=1024,
    cpu_cores=0.0,  # a model may use every core the host has (its threads are its own)
)


@dataclass(frozen=True, slots=True)
class Launched:
    """A started worker, its private scratch folder and its cgroup (removed by
    ``remove_scratch`` once the process has ended)."""

    process: subprocess.Popen[bytes]
    scratch: Path
    isolation: str
    """``bubblewrap`` or ``none`` (a clean exec without namespaces)."""
    cgroup: Cgroup | None = None
    """Where the host has cgroups: counts its processes (``pids.max``); no memory or CPU
    cap, the host's admission measures those."""

    def remove_scratch(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.scratch, ignore_errors=True)


class WorkerLauncher(Protocol):
    """Starts worker processes. ``launch`` is called once per worker, from any thread;
    the process it returns leads its own process group (the host kills the group)."""

    def launch(
        self, args: Sequence[str], *, files: Sequence[Path], fd: int, module: str = WORKER_MODULE
    ) -> Launched:
        """Start the worker ``module`` with ``args``, able to read ``files`` and holding
        the control socket ``fd``; raises ``SandboxUnavailable`` where the operator's
        isolation cannot be had."""
        ...


class SandboxLauncher:
    """Workers started by ``sandbox``, each in a scratch folder under ``scratch_root``
    (the system's temporary folder when None)."""

    def __init__(self, sandbox: Sandbox, *, scratch_root: Path | None = None) -> None:
        self.sandbox = sandbox
        # Each server process keeps its hosts' folders under one of its own, so servers
        # sharing a home (``serve --workers``) sweep only what a dead one left behind.
        self.scratch_root = None if scratch_root is None else scratch_root / f"server-{os.getpid()}"
        if scratch_root is not None:
            sweep_dead(scratch_root)

    def launch(
        self, args: Sequence[str], *, files: Sequence[Path], fd: int, module: str = WORKER_MODULE
    ) -> Launched:
        confinement = self.sandbox.confinement()  # fails closed before anything is made
        if self.scratch_root is not None:
            self.scratch_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="model-host-", dir=self.scratch_root))
        try:
            started = self.sandbox.start(
                [module, *args],
                scratch=scratch,
                limits=HOST_LIMITS,
                shared=_resolved(files),
                pass_fds=(fd,),
                pipes=False,
                stderr=2,  # the server's own error stream, as its logs
                environment={k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
            )
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return Launched(started.process, scratch, confinement.isolation.value, started.cgroup)


def sweep_dead(root: Path) -> list[Path]:
    """Remove the scratch folders of server processes that are gone (killed before they
    could remove their hosts' folders); returns what was removed."""
    removed = []
    for folder in root.glob("server-*") if root.is_dir() else ():
        try:
            pid = int(folder.name.removeprefix("server-"))
        except ValueError:
            continue
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _resolved(files: Sequence[Path]) -> list[Path]:
    """Each file, and its target where it is a symbolic link, so the worker reads it at
    the path it is given."""
    found: list[Path] = []
    for path in files:
        for each in (Path(os.path.abspath(path)), path.resolve()):
            if each not in found:
                found.append(each)
    return found


def unisolated() -> SandboxLauncher:
    """A clean exec without namespaces (``MODELPORT_SANDBOX=unisolated``): for hosts
    built without a sandbox of their own (tests, embedding)."""
    return SandboxLauncher(Sandbox(SandboxMode.UNISOLATED))
