"""Plain records of jobs (no I/O): states, a pipeline's stages, a job and its stage runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from modelport.tenancy.types import Principal

__all__ = [
    "BATCH_PIPELINE",
    "DEFAULT_PIPELINE",
    "INTERNAL_STAGES",
    "TERMINAL",
    "BatchPage",
    "BatchRecord",
    "DatasetSplits",
    "Job",
    "JobPage",
    "JobState",
    "Lease",
    "LeaseLost",
    "LineOutcome",
    "NewJob",
    "Progress",
    "ShardCheckpoint",
    "SplitInput",
    "SplitReader",
    "StageRun",
    "StageSpec",
    "StageState",
    "StreamedOutput",
]


class JobState(StrEnum):
    QUEUED = "queued"
    """Submitted, not claimed by a runner yet."""
    RUNNING = "running"
    """Claimed (or its runner's lease expired: claimable again, at the stage it was in)."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class StageState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class StageSpec:
    """One stage of a pipeline: its name in the job, the implementation that runs it (a
    name the runner's stage registry knows), and how it is retried."""

    name: str
    implementation: str
    retries: int = 2
    """Runs after the first that fail may take (0: one attempt)."""
    backoff_seconds: float = 1.0
    """Wait before the first retry; doubled for each one after."""
    timeout_seconds: float = 300.0
    """Longest one attempt may run; a timed-out attempt counts as a failure."""
    retryable: bool = True
    """False: the first failure fails the job (a stage whose verdict must stand)."""
    params: dict[str, Any] = field(default_factory=dict)
    """The implementation's own options (``postprocess``: ``select``, ``rename``)."""

    def to_doc(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "implementation": self.implementation,
            "retries": self.retries,
            "backoff_seconds": self.backoff_seconds,
            "timeout_seconds": self.timeout_seconds,
            "retryable": self.retryable,
            "params": dict(self.params),
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> StageSpec:
        return cls(
            name=str(doc["name"]),
            implementation=str(doc["implementation"]),
            retries=int(doc.get("retries", 2)),
            backoff_seconds=float(doc.get("backoff_seconds", 1.0)),
            timeout_seconds=float(doc.get("timeout_seconds", 300.0)),
            retryable=bool(doc.get("retryable", True)),
            params=dict(doc.get("params") or {}),
        )


DEFAULT_PIPELINE = (
    StageSpec("validate", "validate", retries=0, retryable=False),
    StageSpec("infer", "infer"),
    StageSpec("postprocess", "postprocess", retries=0, retryable=False),
)
"""validate → infer → postprocess: a malformed input or output selection fails at once;
inference is retried (a backend may be briefly away)."""

VALIDATE_VERSION = "validate_version"
"""A version's validation (``jobs.validation``)."""
EVALUATE = "evaluate"
"""The stage implementation of an evaluation (``evaluations.stage``)."""
INTERNAL_STAGES = frozenset({VALIDATE_VERSION, EVALUATE})
"""Stage implementations only the platform's own jobs run (a version's validation,
``jobs.validation``; an evaluation, ``evaluations``): a submitted pipeline may not name
them."""

MODERATE_INPUT = StageSpec(
    "moderate_input", "moderate", retries=0, retryable=False, params={"on": "input"}
)
MODERATE_OUTPUT = StageSpec(
    "moderate_output", "moderate", retries=0, retryable=False, params={"on": "output"}
)
"""The moderation stages a tenant with an active policy gets in its default pipeline,
around ``infer`` (``jobs.moderate``); a blocked text fails the job at once."""


@dataclass(frozen=True)
class StageRun:
    """What happened to one stage of one job."""

    position: int
    name: str
    implementation: str
    state: StageState
    attempts: int
    closed_attempts: int
    """Attempts whose end was recorded (see ``job_stages.closed_attempts``)."""
    started_at: datetime | None
    finished_at: datetime | None
    error_code: str | None
    error_message: str | None
    output_digest: str | None
    """Its output in the blob store, once done: a stage re-entered reuses it."""


@dataclass(frozen=True)
class NewJob:
    """A job as submitted (``JobService.submit`` builds it)."""

    id: str
    tenant: str
    principal: dict[str, Any]
    """The submitting principal, as ``jobs.principals.principal_doc`` writes it: the job
    runs as it."""
    target_kind: str
    """``model`` or ``endpoint``."""
    target: str
    """``owner/name[:version]`` or the endpoint's name."""
    input_digest: str
    pipeline: tuple[StageSpec, ...]
    webhook: str | None
    idempotency_key: str | None
    fingerprint: str
    created_at: datetime
    trace_context: dict[str, str] | None = None
    """The submitting request's W3C trace context (``observability.tracing.carrier``)."""


@dataclass(frozen=True)
class Lease:
    """A runner's claim on a job. ``generation`` is the job's claim count when it was
    taken (its fencing token): every write the runner makes for the job is conditional
    on it, so once another claim bumped it, this lease writes nothing."""

    job_id: str
    owner: str
    generation: int


@dataclass(frozen=True)
class StreamedOutput:
    """A stage's output made piece by piece: the runner calls ``chunks`` on a worker
    thread and writes each piece to the blob store as it comes, so the output is never
    held whole, and its encoding never runs on the event loop that renews the lease."""

    chunks: Callable[[], Iterator[bytes]]


class LeaseLost(Exception):
    """A write for a job was refused: the lease it carried is no longer the job's."""


@dataclass(frozen=True)
class Job:
    """A job and its stages, as stored."""

    id: str
    tenant: str
    principal: dict[str, Any]
    target_kind: str
    target: str
    input_digest: str
    pipeline: tuple[StageSpec, ...]
    webhook: str | None
    idempotency_key: str | None
    fingerprint: str
    state: JobState
    stage: int
    """Position of the stage to run next (``len(pipeline)`` once every stage is done)."""
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error_code: str | None
    error_message: str | None
    output_digest: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    lease_generation: int = 0
    """How many times the job was claimed: the fencing token of its current lease."""
    stages: tuple[StageRun, ...] = ()
    trace_context: dict[str, str] | None = None
    """The submitting request's W3C trace context: the job's stages continue its trace."""
    erased_at: datetime | None = None
    """When its inputs and outputs were erased (retention, the right to deletion): its
    digests are cleared, the record kept for billing (``jobs.erasure``)."""

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    @property
    def input_dataset(self) -> dict[str, Any] | None:
        """The dataset split a tensor batch reads (``dataset``, ``split``, ``digest``: the
        version's digest recorded at submission), or None."""
        for spec in self.pipeline:
            if spec.implementation == "tensor_shards" and "dataset" in spec.params:
                return {
                    "dataset": spec.params["dataset"],
                    "split": spec.params.get("split"),
                    "digest": spec.params.get("dataset_digest"),
                }
        return None


@dataclass(frozen=True)
class JobPage:
    items: list[Job]
    next_cursor: str | None


# ---- batches over files (``jobs.batch``)
BATCH_PIPELINE = (
    StageSpec("shards", "batch_shards", retries=2, timeout_seconds=24 * 3600.0),
    StageSpec("publish", "batch_publish", retries=2),
)
"""shards → publish: every shard run and checkpointed, then the output and error files
and the manifest published at once. A retried ``shards`` skips the checkpointed shards."""


@dataclass(frozen=True)
class LineOutcome:
    """One request line of a batch, answered: its output line (``ok``) or its error
    line, as the file's surface encodes them (bytes without the newline)."""

    ok: bool
    line: bytes


@dataclass(frozen=True)
class ShardCheckpoint:
    """A finished shard: its rows, how many failed, and its outputs by digest."""

    position: int
    rows: int
    failed: int
    output_digest: str
    error_digest: str


@dataclass(frozen=True)
class BatchRecord:
    """A batch as stored, with its job and progress."""

    id: str
    tenant: str
    job_id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, str] | None
    total: int
    created_at: datetime
    job: Job
    done: int
    """Rows answered, in checkpointed shards."""
    failed: int
    """Of those, rows whose request failed."""
    output_file_id: str | None = None
    error_file_id: str | None = None
    expired: bool = False
    """Its completion window closed before every line ran (``jobs.batch``)."""


@dataclass(frozen=True)
class BatchPage:
    items: list[BatchRecord]
    has_more: bool


@dataclass(frozen=True)
class Progress:
    """A batch job's progress (``jobs.progress``)."""

    rows_total: int | None
    rows_done: int
    rows_failed: int
    estimated_completion: datetime | None
    """At the pace of the shards done so far; None before the first or once ended."""


@dataclass(frozen=True)
class SplitInput:
    """A dataset split a job reads: the version, its digest, the split's file."""

    dataset: str
    """``owner/name:version``."""
    digest: str
    """The dataset version's digest."""
    split: str
    file_digest: str
    features: tuple[tuple[str, str, tuple[int, ...]], ...]
    """Each feature column: its name, datatype and one row's shape."""


class SplitReader(Protocol):
    @property
    def rows(self) -> int: ...

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]: ...


class DatasetSplits(Protocol):
    """Dataset splits as a caller may read them (``DatasetService``): 404
    ``dataset_not_found``/``dataset_version_not_found`` where it may not, 400
    ``unknown_split`` (blocking)."""

    def split_input(self, principal: Principal, dataset: str, split: str) -> SplitInput: ...

    def split_reader(self, principal: Principal, dataset: str, split: str) -> SplitReader: ...
