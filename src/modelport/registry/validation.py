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
   example of the manifest, comparing outputs within the example's tolerance. The
   process runs in the sandbox (``modelport.sandbox``): an empty environment, no
   network, a read-only view of the files, no process creation, an address-space,
   CPU and wall-clock limit (killed with its process group when the time is up). A
   crash, running out of memory or the timeout is a failed validation with its cause
   in the report; where the operator's sandbox mode cannot be met on this machine,
   nothing is run and the cause is ``sandbox_unavailable``.

   Such a version needs at least one example: a model that is never run cannot
   be called validated. For a format the runtime does not know, only the files
   are checked and the report says that nothing was executed.

The report (a JSON object) is always returned, never raised::

    {"passed": bool, "cause": None | "file_check_failed" | "unsafe_content" | "no_examples"
        | "load_failed"
        | "examples_failed" | "out_of_memory" | "timeout" | "crashed"
        | "cpu_limit" | "sandbox_unavailable",
     "detail": str, "format": str, "executed": bool,
     "sandbox": {"isolation": "bubblewrap" | "none", "seccomp": bool, "network",
                 "environment", "filesystem"} (once executed),
     "checks": [{"check": "file", "path", "digest", "size", "passed", "detail",
                 "unsafe"?: kind of code-bearing content found}],
     "examples": [{"index", "passed", "problems", "ms"}],
     "processing"?: {"preprocess", "postprocess"} (entry points each example ran through),
     "timings_ms": {"files", "execution", "total"},
     "limits": {"timeout_seconds", "memory_bytes"}}
"""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

import orjson

from modelport.blobs import BlobStore
from modelport.blobs.verify import copy_verified, iter_verified
from modelport.errors import ModelportError
from modelport.manifest import Manifest, canonical_bytes
from modelport.registry.content import find_unsafe
from modelport.sandbox import Limits, Sandbox, SandboxUnavailable

WORKER_MODULE = "modelport.registry.validation_worker"
_STDERR_TAIL = 4000


class Validator(Protocol):
    """Validates a version's manifest against the stored blobs; returns the report."""

    def validate(self, manifest: Manifest) -> dict[str, Any]: ...


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

    def validate(self, manifest: Manifest) -> dict[str, Any]:
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
                execution_started = time.perf_counter()
                self._execute(manifest, folder, report)
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

    def _execute(self, manifest: Manifest, folder: Path, report: dict[str, Any]) -> None:
        (folder / "manifest.json").write_bytes(canonical_bytes(manifest))
        limits = Limits(
            wall_seconds=self.timeout_seconds,
            cpu_seconds=int(self.timeout_seconds) + 1,
            memory_bytes=self.memory_bytes,
        )
        stderr_path = folder / "stderr.log"
        try:
            with stderr_path.open("wb") as stderr:
                finished = self.sandbox.run(
                    [WORKER_MODULE, "."],
                    scratch=folder,
                    readonly=[folder / "files"],
                    limits=limits,
                    output=stderr,
                )
        except SandboxUnavailable as exc:
            report["cause"] = "sandbox_unavailable"
            report["detail"] = exc.message
            return
        report["executed"] = True
        report["sandbox"] = finished.confinement.as_dict()
        returncode = finished.returncode
        if finished.timed_out:
            report["cause"] = "timeout"
            report["detail"] = (
                f"validation did not finish within {self.timeout_seconds:g}s and was killed"
            )
            return
        result_path = folder / "result.json"
        if result_path.exists():
            result = orjson.loads(result_path.read_bytes())
            report["examples"] = result["examples"]
            if "processing" in result:
                report["processing"] = result["processing"]
            report["timings_ms"]["load"] = result["load_ms"]
            report["detail"] = result["detail"]
            if result["status"] == "passed":
                report["passed"] = True
            else:
                report["cause"] = result["status"]
            return
        tail = stderr_path.read_bytes()[-_STDERR_TAIL:].decode(errors="replace")
        report["stderr_tail"] = tail
        if "MemoryError" in tail or "bad_alloc" in tail:
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
