"""The parent's side of the sandbox: choose the isolation the operator's mode allows,
fail closed where it cannot be had, and run a child under it (``run``: to its end, or
``start``: a long-lived child spoken to through pipes).

Whatever the isolation, the child is a new program (a clean exec) whose environment is
empty but for what Python needs (no credential of the server's reaches it), this process
is non-dumpable before the first child starts (its ``/proc`` entries and memory are
closed to a child), the child runs in its own process group, killed as a whole at its
wall-clock limit, and ``modelport.sandbox.launch`` applies its resource limits, drops
its capabilities and loads the system-call filter before the work starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

from modelport.errors import Unavailable
from modelport.sandbox import bubblewrap, privileges, proctree, seccomp
from modelport.sandbox.cancel import Cancellation
from modelport.sandbox.cgroups import Cgroup, Cgroups, Unconfined, enter
from modelport.sandbox.types import (
    Caps,
    Confinement,
    Enforcement,
    Isolation,
    Limits,
    SandboxMode,
)

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
    answer: bytes = b""
    """What it wrote on its standard output, when ``run`` was asked to read it."""
    answer_overflowed: bool = False
    """It wrote more than ``run`` would read, and was killed for it."""
    memory_exceeded: bool = False
    """The kernel killed a process of its group at the cgroup's memory cap."""


class Sandbox:
    """Runs children under the isolation of ``mode`` (see ``SandboxMode``).

    ``protect``: paths no child may see (the server's home). ``bwrap``: the bubblewrap
    program, by name or path. ``seccomp``: load the system-call filter where libseccomp
    is present (off only to test the namespaces alone). ``observe``: told how each child
    ended (the metrics). ``cgroups``: where each child gets a capped cgroup
    (``modelport.sandbox.cgroups.detect``, once per process); without, the resource
    limits alone. ``caps``: the operator's caps, in every child's ``limits``."""

    def __init__(
        self,
        mode: SandboxMode,
        *,
        protect: Sequence[Path] = (),
        bwrap: str = "bwrap",
        seccomp: bool = True,
        observe: Callable[[Finished], None] | None = None,
        cgroups: Cgroups | None = None,
        caps: Caps = Caps(),
    ) -> None:
        self.caps = caps
        self.mode = mode
        self.cgroups: Cgroups = cgroups if cgroups is not None else Unconfined("not asked for")
        self.protect = tuple(protect)
        self.bwrap = bwrap
        self.use_seccomp = seccomp
        self.observe = observe
        self._spawner: ThreadPoolExecutor | None = None
        self._spawn_lock = threading.Lock()

    def limits(self, *, wall_seconds: float, cpu_seconds: int, memory_bytes: int) -> Limits:
        """A run's limits: its time and memory under the operator's caps."""
        return self.caps.limits(
            wall_seconds=wall_seconds, cpu_seconds=cpu_seconds, memory_bytes=memory_bytes
        )

    def confinement(self) -> Confinement:
        """What a child gets here; raises ``SandboxUnavailable`` where the mode cannot be
        met."""
        filtered = self.use_seccomp and seccomp.available()
        enforcement = self.cgroups.enforcement
        if self.mode is SandboxMode.UNISOLATED:
            return Confinement(Isolation.NONE, filtered, enforcement)
        if bubblewrap.usable(self.bwrap) is None:
            raise SandboxUnavailable(
                f"this machine cannot isolate other people's code: bubblewrap "
                f"('{self.bwrap}') is missing or cannot create namespaces here. Install "
                "bubblewrap (Debian: apt install bubblewrap), or set MODELPORT_SANDBOX="
                "unisolated to run without isolation, on a machine that runs only its "
                "owner's models"
            )
        return Confinement(Isolation.BUBBLEWRAP, filtered, enforcement)

    def run(
        self,
        target: Sequence[str],
        *,
        scratch: Path,
        readonly: Sequence[Path] = (),
        limits: Limits,
        output: IO[bytes] | None = None,
        answer_bytes: int | None = None,
        cancel: Cancellation | None = None,
    ) -> Finished:
        """Run ``target`` (a module name or a ``.py`` path, then its arguments) in
        ``scratch`` (its working directory; paths in ``target`` are relative to it) and
        wait for it, up to ``limits.wall_seconds``. Its standard output and error go to
        ``output`` (discarded when None); with ``answer_bytes``, its standard output is a
        pipe read into ``Finished.answer`` instead, and a child that writes more than
        that many bytes there is killed (``Finished.answer_overflowed``). ``cancel``
        kills the child with everything it started the moment it is cancelled, and the
        run raises ``Cancelled`` once the child is gone (nothing started if cancelled
        before)."""
        if cancel is not None:
            cancel.check()
        argv, env, confinement = self._command(target, scratch, readonly, limits)
        cgroup = self.cgroups.create(limits)
        sink = output if output is not None else subprocess.DEVNULL
        try:
            process = subprocess.Popen(
                enter(cgroup, argv),
                cwd=scratch,
                stdin=subprocess.DEVNULL,
                stdout=sink if answer_bytes is None else subprocess.PIPE,
                stderr=sink,
                start_new_session=True,  # its own process group, killed as a whole
                env=env,
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        reader = None
        if answer_bytes is not None:
            assert process.stdout is not None
            reader = _AnswerReader(process, answer_bytes)
            reader.start()
        hooked = cancel.hooked(partial(kill_tree, process)) if cancel else contextlib.nullcontext()
        try:
            with hooked:
                returncode = process.wait(timeout=limits.wall_seconds)
            if confinement.isolation is Isolation.BUBBLEWRAP and returncode > 128:
                returncode = 128 - returncode  # bwrap exits 128+N for a child killed by N
            finished = Finished(returncode, False, confinement)
        except subprocess.TimeoutExpired:
            kill_group(process)
            finished = Finished(process.returncode, True, confinement)
        if reader is not None:
            answer, overflowed = reader.finish()
            finished = dataclasses.replace(finished, answer=answer, answer_overflowed=overflowed)
        if cgroup is not None:
            finished = dataclasses.replace(finished, memory_exceeded=cgroup.oom_killed())
            cgroup.remove()
        if self.observe is not None:
            self.observe(finished)
        if cancel is not None:
            cancel.check()  # killed for it (or cancelled as it ended): no verdict
        return finished

    def start(
        self,
        target: Sequence[str],
        *,
        scratch: Path,
        readonly: Sequence[Path] = (),
        limits: Limits,
        stderr: IO[bytes] | int | None = None,
        shared: Sequence[Path] = (),
        pass_fds: Sequence[int] = (),
        pipes: bool = True,
        environment: Mapping[str, str] | None = None,
    ) -> Started:
        """Start ``target`` as ``run`` does, without waiting: a long-lived child spoken to
        through its standard input and output (pipes), or, without ``pipes``, through
        the descriptors in ``pass_fds`` (its standard input then reads nothing, and its
        standard output goes where ``stderr`` does: a file, or a descriptor).
        ``shared``: files outside ``scratch`` it may read, at their own paths;
        ``environment``: variables added to the empty one. ``limits.wall_seconds`` is
        not applied here: the caller ends the child (``kill_group``)."""
        argv, env, confinement = self._command(target, scratch, readonly, limits, shared)
        env.update(environment or {})
        cgroup = self.cgroups.create(limits)
        errors = stderr if stderr is not None else subprocess.DEVNULL

        def popen() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                enter(cgroup, argv),
                cwd=scratch,
                stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                stdout=subprocess.PIPE if pipes else errors,
                stderr=errors,
                start_new_session=True,
                env=env,
                pass_fds=tuple(pass_fds),
            )

        # bubblewrap's --die-with-parent kills the child when the *thread* that started it
        # ends: a long-lived child is started from a thread that lives as long as this
        # sandbox, never from a caller's thread.
        with self._spawn_lock:
            if self._spawner is None:
                self._spawner = ThreadPoolExecutor(1, thread_name_prefix="sandbox-spawn")
            spawner = self._spawner
        try:
            process = spawner.submit(popen).result()
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        tree = None if cgroup is not None else proctree.Tree(process.pid)
        return Started(process, confinement, cgroup, tree)

    def _command(
        self,
        target: Sequence[str],
        scratch: Path,
        readonly: Sequence[Path],
        limits: Limits,
        shared: Sequence[Path] = (),
    ) -> tuple[list[str], dict[str, str], Confinement]:
        """The child's command line and environment under this machine's confinement."""
        confinement = self.confinement()
        # Whatever the mode, no child may read this process's environment or memory.
        privileges.protect_parent()
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
            "--file-bytes",
            str(limits.file_bytes),
            *self._process_limit(confinement, limits),
            *(["--seccomp"] if confinement.seccomp else []),
            "--",
            *target,
        ]
        python = bubblewrap.python_paths(self.protect)
        if confinement.isolation is Isolation.BUBBLEWRAP:
            path = bubblewrap.usable(self.bwrap)
            assert path is not None
            argv = bubblewrap.command(
                path,
                launch,
                scratch=scratch,
                readonly=readonly,
                python=python,
                tmp_bytes=limits.tmp_bytes,
                shared=shared,
            )
            home = bubblewrap.SCRATCH
        else:
            argv, home = launch, str(scratch)
        return argv, _environment(home, python), confinement

    @staticmethod
    def _process_limit(confinement: Confinement, limits: Limits) -> list[str]:
        """``RLIMIT_NPROC`` where no cgroup counts the group's processes: it counts all of
        this user's, so the child may start ``limits.processes`` more than run now."""
        if confinement.enforcement is not Enforcement.RLIMITS:
            return []
        return ["--processes", str(proctree.tasks_of(os.getuid()) + limits.processes)]


@dataclass(frozen=True, slots=True)
class Started:
    """A long-lived sandboxed child (``Sandbox.start``)."""

    process: subprocess.Popen[bytes]
    confinement: Confinement
    cgroup: Cgroup | None = None
    tree: proctree.Tree | None = None
    """Its processes as ``/proc`` shows them, where no cgroup counts its CPU time."""

    def cpu_seconds(self) -> float:
        """CPU time of the child and everything it started, so far."""
        if self.cgroup is not None:
            return self.cgroup.cpu_seconds()
        if self.tree is None:
            return 0.0
        return self.tree.cpu_seconds()

    def stop(self) -> None:
        """Kill the child with its process group, and remove its cgroup."""
        kill_group(self.process)
        if self.cgroup is not None:
            self.cgroup.remove()


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


class _AnswerReader(threading.Thread):
    """Reads a child's standard output up to a bound; past it, kills the child."""

    def __init__(self, process: subprocess.Popen[bytes], limit: int) -> None:
        super().__init__(name="sandbox-answer", daemon=True)
        self.process = process
        self.limit = limit
        self.chunks: list[bytes] = []
        self.overflowed = False

    def run(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        total = 0
        while chunk := os.read(stream.fileno(), 1 << 16):
            total += len(chunk)
            if total > self.limit:
                self.overflowed = True
                self._kill()
                return
            self.chunks.append(chunk)

    def finish(self) -> tuple[bytes, bool]:
        """What was read, once the pipe is closed (the child and anything it left are
        killed first if the pipe stays open)."""
        self.join(timeout=_DRAIN_SECONDS)
        if self.is_alive():  # something of the child's still holds the pipe open
            self._kill()
            self.join(timeout=_DRAIN_SECONDS)
        assert self.process.stdout is not None
        if not self.is_alive():
            self.process.stdout.close()
        return b"".join(self.chunks), self.overflowed

    def _kill(self) -> None:
        # The group, not ``kill_group``: the caller's thread is the one that waits.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


_DRAIN_SECONDS = 30.0


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process``, its descendants (found in ``/proc`` while it still holds them,
    also those that left its group) and its process group, at once; from any thread
    (the one waiting for it reaps it)."""
    for pid in reversed(proctree.descendants(process.pid)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
