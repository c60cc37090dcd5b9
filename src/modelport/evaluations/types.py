"""Plain records of evaluations and leaderboards."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class EvaluationKind(StrEnum):
    VERIFIED = "verified"
    """Run by the platform, as a job: its scores are measured."""
    CLAIMED = "claimed"
    """Stated by the model's publisher: shown apart, never ranked with measured ones."""


class EvaluationState(StrEnum):
    QUEUED = "queued"
    """Its job has not ended yet."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True)
class ServedVersion:
    """A version that answered rows of an endpoint evaluation."""

    model: str
    """``owner/name`` ('' for the endpoint's static answer)."""
    version: str
    digest: str
    rows: int

    @property
    def ref(self) -> str:
        return f"{self.model}:{self.version}"

    def to_doc(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "version": self.version,
            "digest": self.digest,
            "rows": self.rows,
        }


@dataclass(frozen=True)
class Evaluation:
    id: str
    kind: EvaluationKind
    tenant: str
    """Who ran it (or, for a claim, the publisher's tenant)."""
    created_by: str
    job_id: str | None
    model_owner: str
    model_name: str
    model_version: str
    version_digest: str
    dataset_owner: str
    dataset_name: str
    dataset_version: str
    dataset_digest: str
    split: str
    task: str
    output: str
    published: bool
    state: EvaluationState
    metrics: dict[str, float] | None
    rows: int | None
    latency_ms: float | None
    """Measured: the mean wall time of the evaluation's calls per row, in ms."""
    error_code: str | None
    error_message: str | None
    created_at: datetime
    finished_at: datetime | None
    endpoint: str | None = None
    """The endpoint it called, for an evaluation of an endpoint; the ``model_*`` fields
    then name the version that served every row, or (several served) the version the
    endpoint ran first when it was submitted."""
    served: tuple[ServedVersion, ...] = ()
    """An endpoint evaluation's versions that answered its rows, once it succeeded."""

    @property
    def model(self) -> str:
        return f"{self.model_owner}/{self.model_name}"

    @property
    def version_score(self) -> bool:
        """Whether its scores are one version's verified scores: run by the platform, and
        for an endpoint, every row answered by one version (not mixed by a split)."""
        if self.kind is not EvaluationKind.VERIFIED:
            return False
        if self.endpoint is None:
            return True
        return len(self.served) == 1 and bool(self.served[0].model)

    @property
    def dataset(self) -> str:
        return f"{self.dataset_owner}/{self.dataset_name}"


@dataclass(frozen=True)
class NewEvaluation:
    """What a caller asks to be evaluated (``EvaluationService.submit``)."""

    model: str | None
    """``owner/name``; None when ``endpoint`` names the target."""
    dataset: str
    """``owner/name``."""
    dataset_version: str
    split: str
    version: str | None = None
    """A version or alias; None: the model's latest."""
    endpoint: str | None = None
    """An endpoint called instead of a model: its routing picks the version per call."""
    output: str | None = None
    """The model output scored; None: its first."""
    publish: bool = True
    """Shown on the leaderboard (else only to the tenant that ran it)."""


@dataclass(frozen=True)
class Claim:
    """A publisher's own scores for one of its versions on a dataset split."""

    model: str
    version: str
    dataset: str
    dataset_version: str
    split: str
    metrics: dict[str, float]


@dataclass(frozen=True)
class VersionScore:
    """A version's best verified score on its task's metric (routing weighs it)."""

    value: float
    higher_is_better: bool
    latency_ms: float | None
    """The measured mean latency per row of the evaluation that scored it."""


@dataclass(frozen=True)
class Price:
    """A version's price beside its score, in micro-units (None: no such rule)."""

    per_1k_calls_micros: int | None = None
    per_1k_rows_micros: int | None = None
    per_1m_input_tokens_micros: int | None = None
    per_1m_output_tokens_micros: int | None = None

    def to_doc(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class BoardEntry:
    rank: int | None
    """1 for the best verified score; None for a claim or a mixed endpoint evaluation
    (never ranked)."""
    evaluation: Evaluation
    score: float
    price: Price


@dataclass(frozen=True)
class Leaderboard:
    task: str
    dataset: str
    split: str | None
    metric: str
    higher_is_better: bool
    verified: list[BoardEntry] = field(default_factory=list)
    claimed: list[BoardEntry] = field(default_factory=list)
    endpoints: list[BoardEntry] = field(default_factory=list)
    """Endpoint evaluations whose rows several versions served: measured, unranked."""

    def to_doc(self, entry_doc: Any) -> dict[str, Any]:
        return {
            "task": self.task,
            "dataset": self.dataset,
            "split": self.split,
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "verified": [entry_doc(e) for e in self.verified],
            "claimed": [entry_doc(e) for e in self.claimed],
            "endpoints": [entry_doc(e) for e in self.endpoints],
        }
