"""The parent's side of the sandbox: choose the isolation the operator's mode allows,
fail closed where it cannot be had, and run a child under it (``run``: to its end, or
``start``: a long-lived child spoken to through pipes).

Whatever the isolation, the child's environment is empty but for what Python needs (no
credential of the server's reaches it), it runs in its own process group, killed as a
whole at its wall-clock limit, and ``modelport.sandbox.launch`` applies its resource
limits and the system-call filter before the work starts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from modelport.errors import Unavailable
from modelport.sandbox import bubblewrap, seccomp
from modelport.sandbox.types import Confinement, Isolation, Limits, SandboxMode

LAUNCHER = "modelport.sandbox.launch"


class SandboxUnavailable(Unavailable):
    """The operator's mode asks for an isolation this machine cannot give."""

    default_code = "sandbox_unavailable"


@dataclass(frozen=True, slots=True)
class Finished:
    """How a child ended."""

    returncode: int
    """Negative: killed by that signal (also under bubblewrap, which reports it as an
    exit status of 128 and the signal)."""
    timed_out: bool
    confinement: Confinement


class Sandbox:
    """Runs children under the isolation of ``mode`` (see ``SandboxMode``).

    ``protect``: paths no child may see (the server's home). ``bwrap``: the bubblewrap
    program, by name or path. ``seccomp``: load the system-call filter where libseccomp
    is present (off only to test the namespaces alone). ``observe``: told how each child
    ended (the metrics)."""

    def __init__(
        self,
        mode: SandboxMode,
        *,
        protect: Sequence[Path] = (),
        bwrap: str = "bwrap",
        seccomp: bool = True,
        observe: Callable[[Finished], None] | None = None,
    ) -> None:
        self.mode = mode
        self.protect = tuple(protect)
        self.bwrap = bwrap
        self.use_seccomp = seccomp
        self.observe = observe
        self._spawner: ThreadPoolExecutor | None = None
        self._spawn_lock = threading.Lock()

    def confinement(self) -> Confinement:
        """What a child gets here; raises ``SandboxUnavailable`` where the mode cannot be
        met."""
        filtered = self.use_seccomp and seccomp.available()
        if self.mode is SandboxMode.UNISOLATED:
            return Confinement(Isolation.NONE, filtered)
        if bubblewrap.usable(self.bwrap) is None:
            raise SandboxUnavailable(
                f"this machine cannot isolate other people's code: bubblewrap "
                f"('{self.bwrap}') is missing or cannot create namespaces here. Install "
                "bubblewrap (Debian: apt install bubblewrap), or set MODELPORT_SANDBOX="
                "unisolated to run without isolation, on a machine that runs only its "
                "owner's models"
            )
        return Confinement(Isolation.BUBBLEWRAP, filtered)

    def run(
        self,
        target: Sequence[str],
        *,
        scratch: Path,
        readonly: Sequence[Path] = (),
        limits: Limits,
        output: IO[bytes] | None = None,
    ) -> Finished:
        """Run ``target`` (a module name or a ``.py`` path, then its arguments) in
        ``scratch`` (its working directory; paths in ``target`` are relative to it) and
        wait for it, up to ``limits.wall_seconds``. Its standard output and error go to
        ``output`` (discarded when None)."""
        argv, env, confinement = self._command(target, scratch, readonly, limits)
        sink = output if output is not None else subprocess.DEVNULL
        process = subprocess.Popen(
            argv,
            cwd=scratch,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            start_new_session=True,  # its own process group, killed as a whole
            env=env,
        )
        try:
            returncode = process.wait(timeout=limits.wall_seconds)
            if confinement.isolation is Isolation.BUBBLEWRAP and returncode > 128:
                returncode = 128 - returncode  # bwrap exits 128+N for a child killed by N
            finished = Finished(returncode, False, confinement)
        except subprocess.TimeoutExpired:
            kill_group(process)
            finished = Finished(process.returncode, True, confinement)
        if self.observe is not None:
            self.observe(finished)
        return finished

    def start(
        self,
        target: Sequence[str],
        *,
        scratch: Path,
        readonly: Sequence[Path] = (),
        limits: Limits,
        stderr: IO[bytes] | None = None,
    ) -> Started:
        """Start ``target`` as ``run`` does, without waiting: a long-lived child spoken to
        through its standard input and output (pipes). ``limits.wall_seconds`` is not
        applied here: the caller ends the child (``kill_group``)."""
        argv, env, confinement = self._command(target, scratch, readonly, limits)

        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                argv,
                cwd=scratch,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr if stderr is not None else subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )

        # bubblewrap's --die-with-parent kills the child when the *thread* that started it
        # ends: a long-lived child is started from a thread that lives as long as this
        # sandbox, never from a caller's thread.
        with self._spawn_lock:
            if self._spawner is None:
                self._spawner = ThreadPoolExecutor(1, thread_name_prefix="sandbox-spawn")
            spawner = self._spawner
        process = spawner.submit(popen).result()
        return Started(process, confinement)

    def _command(
        self, target: Sequence[str], scratch: Path, readonly: Sequence[Path], limits: Limits
    ) -> tuple[list[str], dict[str, str], Confinement]:
        """The child's command line and environment under this machine's confinement."""
        confinement = self.confinement()
        launch = [
            sys.executable,
            "-m",
            LAUNCHER,
            "--memory-bytes",
            str(limits.memory_bytes),
            "--cpu-seconds",
            str(limits.cpu_seconds),
            "--open-files",
            str(limits.open_files),
            *(["--seccomp"] if confinement.seccomp else []),
            "--",
            *target,
        ]
        python = bubblewrap.python_paths(self.protect)
        if confinement.isolation is Isolation.BUBBLEWRAP:
            path = bubblewrap.usable(self.bwrap)
            assert path is not None
            argv = bubblewrap.command(
                path, launch, scratch=scratch, readonly=readonly, python=python
            )
            home = bubblewrap.SCRATCH
        else:
            argv, home = launch, str(scratch)
        return argv, _environment(home, python), confinement


@dataclass(frozen=True, slots=True)
class Started:
    """A long-lived sandboxed child (``Sandbox.start``)."""

    process: subprocess.Popen[bytes]
    confinement: Confinement


def _environment(home: str, python: Sequence[str]) -> dict[str, str]:
    """All a child is told: where Python finds its packages, and where to write."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": "/tmp",
        "PYTHONPATH": os.pathsep.join(python),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "HF_HOME": f"{home}/.cache/huggingface",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
