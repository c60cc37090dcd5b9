"""Validation of a version: its files against the manifest, then its examples.

1. Files: every file's blob must be stored with the declared size, and is streamed
   and hashed in full through ``modelport.blobs.verify`` (a stored blob whose bytes
   no longer match is caught here). Its contents are then sniffed for code-bearing
   contents (``modelport.registry.content``), as publishing does: a version
   published before that check, or carrying what it has learnt to see since, fails
   with cause ``unsafe_content``.
2. Execution, for a format the runtime knows (``modelport.runtime.formats``): the
   verified files are copied to a private folder and a separate process
   (``modelport.registry.validation_worker``) loads the model and runs every
   example of the manifest. It only answers the outputs, over a pipe (size-bounded,
   framed); this side parses that answer strictly and compares the outputs with the
   examples itself (``modelport.registry.verdict``): within the example's tolerance, or
   token for token for a generative version. A worker that ends without a complete
   answer, answers anything else, or leaves files in its scratch folder fails with
   cause ``validation_failed`` and the reason. The process runs in the sandbox
   (``modelport.sandbox``): an empty environment, no network, a read-only view of the
   files, no process creation, an address-space, CPU and wall-clock limit (killed with its process group when the time is up). A
   crash, running out of memory or the timeout is a failed validation with its cause
   in the report; where the operator's sandbox mode cannot be met on this machine,
   nothing is run and the cause is ``sandbox_unavailable``.

   Such a version needs at least one example: a model that is never run cannot
   be called validated. For a format the runtime does not know, only the files
   are checked and the report says that nothing was executed.

A validation given a ``Cancellation`` that is cancelled stops there: its sandboxed child
is killed with everything it started, and ``validate`` raises ``Cancelled`` instead of
returning a report.

The report (a JSON object) is always returned, never raised (but for a cancel)::

    {"passed": bool, "cause": None | "file_check_failed" | "unsafe_content" | "no_examples"
        | "load_failed"
        | "examples_failed" | "out_of_memory" | "timeout" | "crashed"
        | "cpu_limit" | "sandbox_unavailable" | "validation_failed",
     "detail": str, "format": str, "executed": bool,
     "sandbox": {"isolation": "bubblewrap" | "none", "seccomp": bool, "network",
                 "environment", "limits": "cgroup2" | "cgroup1" | "rlimits",
                 "filesystem"} (once executed),
     "checks": [{"check": "file", "path", "digest", "size", "passed", "detail",
                 "unsafe"?: kind of code-bearing content found}],
     "examples": [{"index", "passed", "problems", "ms"}],
     "processing"?: {"preprocess", "postprocess"} (entry points each example ran through),
     "stderr_tail"?: str (the worker's last words, when it did not answer as it should),
     "timings_ms": {"files", "execution", "total"},
     "limits": {"timeout_seconds", "memory_bytes"}}
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from modelport.blobs import BlobStore
from modelport.blobs.verify import copy_verified, iter_verified
from modelport.errors import ModelportError
from modelport.manifest import Manifest, canonical_bytes
from modelport.registry.content import find_unsafe
from modelport.registry.verdict import ANSWER_LIMIT_BYTES, AnswerError, judge
from modelport.sandbox import Finished, Sandbox, SandboxUnavailable
from modelport.sandbox.cancel import Cancellation

WORKER_MODULE = "modelport.registry.validation_worker"
JOB = "job"
"""The read-only folder of the worker's scratch folder: the manifest and the files."""
_STDERR_TAIL = 4000
_SHOWN = 5


class Validator(Protocol):
    """Validates a version's manifest against the stored blobs; returns the report, or
    raises ``Cancelled`` once ``cancel`` is cancelled (its sandboxed child killed)."""

    def validate(
        self, manifest: Manifest, *, cancel: Cancellation | None = None
    ) -> dict[str, Any]: ...


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def executable_formats() -> frozenset[str]:
    """The formats a validation can load and run (the installed format plugins)."""
    from modelport.runtime.formats import known_formats

    return known_formats()


class SubprocessValidator:
    """Runs validations with the configured time and memory limits."""

    def __init__(
        self,
        blobs: BlobStore,
        *,
        work_dir: Path,
        timeout_seconds: float,
        memory_bytes: int,
        sandbox: Sandbox,
    ) -> None:
        self.blobs = blobs
        self.sandbox = sandbox
        self.work_dir = work_dir
        self.timeout_seconds = timeout_seconds
        self.memory_bytes = memory_bytes

    def validate(self, manifest: Manifest, *, cancel: Cancellation | None = None) -> dict[str, Any]:
        started = time.perf_counter()
        report: dict[str, Any] = {
            "passed": False,
            "cause": None,
            "detail": "",
            "format": manifest.format,
            "executed": False,
            "checks": [],
            "examples": [],
            "timings_ms": {},
            "limits": {"timeout_seconds": self.timeout_seconds, "memory_bytes": self.memory_bytes},
        }
        executable = manifest.format in executable_formats()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.work_dir, prefix="validate-") as tmp:
            folder = Path(tmp)
            files_started = time.perf_counter()
            files_ok = self._check_files(manifest, folder / "files" if executable else None, report)
            report["timings_ms"]["files"] = _ms(files_started)
            unsafe = [c["path"] for c in report["checks"] if c.get("unsafe")]
            if unsafe:
                report["cause"] = "unsafe_content"
                report["detail"] = "file(s) hold contents that run code when loaded: " + (
                    ", ".join(unsafe)
                )
            elif not files_ok:
                bad = [c["path"] for c in report["checks"] if not c["passed"]]
                report["cause"] = "file_check_failed"
                report["detail"] = "file(s) do not match the manifest: " + ", ".join(bad)
            elif not executable:
                report["passed"] = True
                report["detail"] = (
                    f"format '{manifest.format}' is not executable by this runtime: "
                    "only files and digests were checked, no example was run"
                )
            elif not manifest.examples:
                report["cause"] = "no_examples"
                report["detail"] = (
                    f"format '{manifest.format}' is executable, so the manifest needs at "
                    "least one example to validate against"
                )
            else:
                if cancel is not None:
                    cancel.check()  # the files took a while: nothing started yet
                execution_started = time.perf_counter()
                self._execute(manifest, folder, report, cancel)
                report["timings_ms"]["execution"] = _ms(execution_started)
        report["timings_ms"]["total"] = _ms(started)
        return report

    # ---- files

    def _check_files(self, manifest: Manifest, dest: Path | None, report: dict[str, Any]) -> bool:
        ok = True
        for entry in manifest.files:
            check: dict[str, Any] = {
                "check": "file",
                "path": entry.path,
                "digest": entry.digest,
                "size": entry.size,
                "passed": False,
                "detail": "",
            }
            stored = self.blobs.size(entry.digest)
            if stored is None:
                check["detail"] = "blob is not stored"
            elif stored != entry.size:
                check["detail"] = f"stored size {stored} != declared size {entry.size}"
            else:
                target = dest / entry.path if dest is not None else None
                problem = self._stream_verified(entry.digest, target)
                found = None
                if problem is None:
                    try:
                        found = find_unsafe(self.blobs, entry.digest, entry.size)
                    except Exception as exc:  # a backend failure is a failed check, reported
                        problem = f"could not read blob contents: {exc}"
                if found is not None:
                    # Published before contents were sniffed, or the sniffing learned more.
                    check["unsafe"] = found.kind
                    where = f"member {found.member!r}: " if found.member else ""
                    problem = f"unsafe content: {where}{found.detail}"
                check["passed"] = problem is None
                check["detail"] = problem or "digest verified"
            ok = ok and check["passed"]
            report["checks"].append(check)
        return ok

    def _stream_verified(self, digest: str, target: Path | None) -> str | None:
        """Hash the whole blob (copying it to ``target`` if given); a problem, or None."""
        try:
            if target is None:
                for _ in iter_verified(self.blobs, digest):
                    pass
            else:
                copy_verified(self.blobs, digest, target)
        except ModelportError as exc:  # blob_corrupted, blob_not_found
            return exc.message
        except Exception as exc:  # any backend failure is a failed check, reported
            return f"could not read blob: {exc}"
        return None

    # ---- execution

    def _execute(
        self,
        manifest: Manifest,
        folder: Path,
        report: dict[str, Any],
        cancel: Cancellation | None = None,
    ) -> None:
        # The worker's scratch folder holds only the read-only job (the manifest and the
        # files); its standard error is kept outside, out of its reach.
        scratch = folder / "scratch"
        job = scratch / JOB
        job.mkdir(parents=True)
        (folder / "files").rename(job / "files")
        (job / "manifest.json").write_bytes(canonical_bytes(manifest))
        limits = self.sandbox.limits(
            wall_seconds=self.timeout_seconds,
            cpu_seconds=int(self.timeout_seconds) + 1,
            memory_bytes=self.memory_bytes,
        )
        stderr_path = folder / "stderr.log"
        try:
            with stderr_path.open("wb") as stderr:
                finished = self.sandbox.run(
                    [WORKER_MODULE, JOB],
                    scratch=scratch,
                    readonly=[job],
                    limits=limits,
                    output=stderr,
                    answer_bytes=ANSWER_LIMIT_BYTES,
                    cancel=cancel,
                )
        except SandboxUnavailable as exc:
            report["cause"] = "sandbox_unavailable"
            report["detail"] = exc.message
            return
        report["executed"] = True
        report["sandbox"] = finished.confinement.as_dict()
        if manifest.processing is not None:
            report["processing"] = {
                "preprocess": manifest.processing.preprocess,
                "postprocess": manifest.processing.postprocess,
            }
        if finished.timed_out:
            report["cause"] = "timeout"
            report["detail"] = (
                f"validation did not finish within {self.timeout_seconds:g}s and was killed"
            )
            return
        tail = stderr_path.read_bytes()[-_STDERR_TAIL:].decode(errors="replace")
        problem = _misconduct(finished, scratch)
        if problem is None:
            try:
                verdict = judge(manifest, finished.answer)
            except AnswerError as exc:
                if not exc.truncated or finished.returncode == 0:
                    problem = str(exc)
                else:  # it ended early because it was stopped, or crashed: say which
                    report["stderr_tail"] = tail
                    _ended(finished, tail, report)
                    return
            else:
                if finished.returncode != 0:
                    problem = f"it exited with status {finished.returncode} after its answer"
                else:
                    report["examples"] = verdict.examples
                    report["timings_ms"]["load"] = verdict.load_ms
                    report["detail"] = verdict.detail
                    report["passed"] = verdict.status == "passed"
                    report["cause"] = None if report["passed"] else verdict.status
                    return
        report["stderr_tail"] = tail
        report["cause"] = "validation_failed"
        report["detail"] = f"the validation process broke the protocol: {problem}"


def _misconduct(finished: Finished, scratch: Path) -> str | None:
    """What the worker did that a validation worker never does: answer too much, or
    leave files in its scratch folder (a result it would have the platform believe)."""
    if finished.answer_overflowed:
        return f"it wrote more than {ANSWER_LIMIT_BYTES} bytes on its standard output"
    written = _written(scratch)
    if written:
        more = " and more" if len(written) > _SHOWN else ""
        return "it wrote files: " + ", ".join(written[:_SHOWN]) + more
    return None


def _written(scratch: Path) -> list[str]:
    """Up to ``_SHOWN`` + 1 things the worker left in its scratch folder, outside the job
    (links are not followed: what they point at is the host's)."""
    found: list[str] = []
    for top, dirs, files in os.walk(scratch):
        here = Path(top)
        if here == scratch:
            dirs[:] = [d for d in dirs if d != JOB]
        links = [d for d in dirs if (here / d).is_symlink()]
        found += [str((here / name).relative_to(scratch)) for name in [*files, *links]]
        if len(found) > _SHOWN:
            break
    return sorted(found)[: _SHOWN + 1]


def _ended(finished: Finished, tail: str, report: dict[str, Any]) -> None:
    """The cause of a worker that stopped before its answer was complete."""
    returncode = finished.returncode
    if finished.memory_exceeded:
        report["cause"] = "out_of_memory"
        report["detail"] = (
            "the validation process was killed at its memory cap (its cgroup's resident "
            "memory, its private /tmp included)"
        )
    elif "MemoryError" in tail or "bad_alloc" in tail:
        report["cause"] = "out_of_memory"
        report["detail"] = "the validation process ran out of memory under its limit"
    elif returncode == -signal.SIGXCPU:
        report["cause"] = "cpu_limit"
        report["detail"] = "the validation process used up its CPU time and was stopped"
    elif returncode < 0:
        report["cause"] = "crashed"
        report["detail"] = f"the validation process was killed by {_signal_name(-returncode)}"
    else:
        report["cause"] = "crashed"
        report["detail"] = f"the validation process exited with status {returncode}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
