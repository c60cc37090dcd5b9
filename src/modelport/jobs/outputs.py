"""A job's outputs as a caller gets them: small ones inline, large ones by reference
with a signed, expiring URL (``jobs.signing``), and the blobs behind those URLs.

A job's outputs are its output document (``Job.output_digest``), its stages' outputs
and, for a batch (a pipeline of ``batch_shards`` or ``tensor_shards``), the shards its
output manifest lists. Any other digest is not the job's: 404 ``output_not_found``,
whether or not the blob exists. An erased job's (``jobs.erasure``) are gone: 410
``erased``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from modelport.blobs.service import BlobService
from modelport.blobs.types import Blob
from modelport.errors import Gone, InvalidInput, NotFound
from modelport.jobs import tensors
from modelport.jobs.progress import SHARDING
from modelport.jobs.service import JobService
from modelport.jobs.signing import OutputSigner, SignedOutput
from modelport.jobs.types import Job

__all__ = ["JobOutput", "JobOutputs", "job_erased", "output_not_found"]

_SHARD_KEYS = ("digest", "output", "errors")
"""Where a manifest's shard names a blob: a tensor batch's ``.npy`` (``digest``), a
JSON Lines batch's output and error lines."""


def output_not_found(job_id: str, digest: str) -> NotFound:
    return NotFound(f"job '{job_id}' has no output {digest}", code="output_not_found", job=job_id)


def job_erased(job_id: str) -> Gone:
    return Gone(
        f"job '{job_id}' had its inputs and outputs erased (retention or deletion)",
        code="erased",
        job=job_id,
    )


@dataclass(frozen=True)
class JobOutput:
    """A succeeded job's output document, inline or by reference."""

    digest: str
    size: int
    document: dict[str, Any] | None
    """The document itself when it is at most the inline limit; None above it (or when
    the output is not a JSON object: a custom stage's bytes)."""
    signed: SignedOutput | None
    """Its URL's expiry and signature (None: the installation cannot sign)."""
    shards: dict[str, SignedOutput | None] = field(default_factory=dict)
    """A batch manifest's shard blobs, by digest, each with its signature."""


class JobOutputs:
    """Shows a job's outputs and opens them by signed URL or by the tenant's key."""

    def __init__(
        self, jobs: JobService, blobs: BlobService, signer: OutputSigner, *, inline_bytes: int
    ) -> None:
        self.jobs = jobs
        self.blobs = blobs
        self.signer = signer
        self.inline_bytes = inline_bytes

    def output(self, job: Job) -> JobOutput | None:
        """The job's output (None until it has one). Above ``inline_bytes`` its document
        is not read at all: only its size and a signed URL are given. None too once
        erased: the job's record says when (``erased_at``)."""
        if job.output_digest is None:
            return None
        blob = self.blobs.stat(job.output_digest)
        signed = self.signer.sign(job.id, blob.digest)
        if blob.size > self.inline_bytes:
            return JobOutput(blob.digest, blob.size, None, signed)
        try:
            document = tensors.loads(self.blobs.get(blob.digest))
        except InvalidInput:  # a custom last stage's bytes that are no JSON object
            return JobOutput(blob.digest, blob.size, None, signed)
        shards = {d: self.signer.sign(job.id, d) for d in _shard_digests(document)}
        return JobOutput(blob.digest, blob.size, document, signed, shards)

    def open_signed(
        self, job_id: str, digest: str, expires: str, signature: str
    ) -> tuple[Blob, Iterator[bytes]]:
        """The output behind a signed URL: the signature is checked first (403
        ``invalid_signature``, ``url_expired``), before anything about the job is
        looked up, so a forged URL learns nothing."""
        self.signer.verify(job_id, digest, expires, signature)
        return self._open(self.jobs.get(None, job_id), digest)

    def open(self, tenant: str | None, job_id: str, digest: str) -> tuple[Blob, Iterator[bytes]]:
        """The output of a job ``tenant`` may see (None: any), by its key."""
        return self._open(self.jobs.get(tenant, job_id), digest)

    def _open(self, job: Job, digest: str) -> tuple[Blob, Iterator[bytes]]:
        if job.erased_at is not None:
            raise job_erased(job.id)
        if digest not in self.digests(job):
            raise output_not_found(job.id, digest)
        blob = self.blobs.stat(digest)
        return blob, self.blobs.read(blob)

    def digests(self, job: Job) -> set[str]:
        """Every blob that is one of the job's outputs (see the module docstring)."""
        found = {run.output_digest for run in job.stages if run.output_digest is not None}
        if job.output_digest is not None:
            found.add(job.output_digest)
        if any(spec.implementation in SHARDING for spec in job.pipeline):
            # A batch's manifest is small (a line per shard); a cancelled one's is its
            # first stage's output.
            for digest in list(found):
                size = self.blobs.stat(digest).size
                if size <= max(self.inline_bytes, 1 << 20):
                    found |= _shard_digests(_document(self.blobs.get(digest)))
        return found


def _document(raw: bytes) -> dict[str, Any]:
    try:
        return tensors.loads(raw)
    except InvalidInput:  # a stage output that is not a JSON object holds no shards
        return {}


def _shard_digests(document: dict[str, Any]) -> set[str]:
    shards = document.get("shards")
    if not isinstance(shards, list):
        return set()
    return {
        shard[key]
        for shard in shards
        if isinstance(shard, dict)
        for key in _SHARD_KEYS
        if isinstance(shard.get(key), str)
    }
