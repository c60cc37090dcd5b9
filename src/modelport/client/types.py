"""Typed results of the client. Each keeps the server's whole JSON document as ``raw``
(what ``--json`` prints, and fields a result type does not name yet)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

T = TypeVar("T")
Json = dict[str, Any]


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; ``next_cursor`` fetches the next (None: the last page)."""

    items: list[T]
    next_cursor: str | None
    raw: Json = field(repr=False)


def page_of(parse: Callable[[Json], T]) -> Callable[[Json], Page[T]]:
    def build(body: Json) -> Page[T]:
        return Page([parse(item) for item in body["items"]], body.get("next_cursor"), body)

    return build


def items_of(parse: Callable[[Json], T]) -> Callable[[Json], list[T]]:
    def build(body: Json) -> list[T]:
        return [parse(item) for item in body["items"]]

    return build


@dataclass(frozen=True)
class Model:
    model: str
    task: str
    license: str | None
    visibility: str
    tags: list[str]
    description: str
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Model:
        return cls(
            body["model"],
            body["task"],
            body["license"],
            body["visibility"],
            list(body["tags"]),
            body["description"],
            body,
        )


@dataclass(frozen=True)
class Version:
    """A version; ``manifest`` and ``signatures`` are None where the listing leaves them out."""

    model: str
    version: str
    state: str
    format: str
    license: str | None
    manifest_digest: str
    manifest: Json | None
    signatures: list[Json] | None
    raw: Json = field(repr=False)

    @property
    def ref(self) -> str:
        return f"{self.model}:{self.version}"

    @classmethod
    def from_json(cls, body: Json) -> Version:
        return cls(
            body["model"],
            body["version"],
            body["state"],
            body["format"],
            body["license"],
            body["manifest_digest"],
            body.get("manifest"),
            body.get("signatures"),
            body,
        )


@dataclass(frozen=True)
class Transition:
    """A lifecycle event appended; or, for ``validated``, a validation still running as
    a job (``pending``: the server answered 202 with the job, ``job``)."""

    state: str
    from_state: str | None
    reason: str
    raw: Json = field(repr=False)
    job: str | None = None
    """The validation's job id (``validated`` only)."""
    pending: bool = False

    @classmethod
    def from_json(cls, body: Json) -> Transition:
        if "event" not in body:  # 202: the validation's job, still queued or running
            return cls("", None, "", body, job=str(body["id"]), pending=True)
        event = body["event"]
        job = body.get("job")
        job_id = str(job["id"]) if isinstance(job, dict) else None
        return cls(body["state"], event["from"], event["reason"], body, job=job_id)


@dataclass(frozen=True)
class ValidationReport:
    """The latest validation of a version: ``passed``, and ``problems``: one line per
    failed check or example, as the report words it."""

    passed: bool
    created_at: str
    report: Json
    raw: Json = field(repr=False)

    @property
    def problems(self) -> list[str]:
        return report_problems(self.report)

    @classmethod
    def from_json(cls, body: Json) -> ValidationReport:
        return cls(bool(body["passed"]), body["created_at"], body.get("report") or {}, body)


def report_problems(report: Json) -> list[str]:
    """Every failure a validation report holds, one line each: the failed file checks,
    each failed example's problems, and the report's cause and detail when nothing more
    specific says why."""
    problems: list[str] = []
    for check in report.get("checks") or []:
        if isinstance(check, dict) and not check.get("passed", True):
            where = check.get("path") or check.get("check") or "check"
            problems.append(f"{where}: {check.get('detail') or 'failed'}")
    for example in report.get("examples") or []:
        if isinstance(example, dict) and not example.get("passed", True):
            label = f"example {example.get('index', '?')}"
            reasons = example.get("problems") or ["failed"]
            problems.extend(f"{label}: {reason}" for reason in reasons)
    if not problems and not report.get("passed", True):
        cause, detail = report.get("cause"), report.get("detail")
        problems.append(f"{cause}: {detail}" if cause and detail else str(detail or cause))
    return problems


@dataclass(frozen=True)
class Alias:
    alias: str
    version: str
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Alias:
        return cls(body["alias"], body["version"], body)


@dataclass(frozen=True)
class Endpoint:
    name: str
    tenant: str
    active_deployment: int | None
    previous_deployment: int | None
    traffic: list[Json]
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Endpoint:
        return cls(
            body["name"],
            body["tenant"],
            body["active_deployment"],
            body["previous_deployment"],
            list(body.get("traffic") or []),
            body,
        )


@dataclass(frozen=True)
class Deployment:
    """A deployment's progress: ``state`` (pending, active, failed, ...), ``ready`` once
    every version is loaded, each version's ``weight`` and the rollout."""

    id: int
    endpoint: str
    state: str
    ready: bool
    cause: str | None
    versions: list[Json]
    rollout: Json
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Deployment:
        return cls(
            body["id"],
            body["endpoint"],
            body["state"],
            bool(body["ready"]),
            body.get("cause"),
            list(body["versions"]),
            body["rollout"],
            body,
        )


@dataclass(frozen=True)
class Rollback:
    rolled_back: Deployment
    endpoint: Endpoint
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Rollback:
        return cls(
            Deployment.from_json(body["rolled_back"]), Endpoint.from_json(body["endpoint"]), body
        )


@dataclass(frozen=True)
class Key:
    """An API key; ``key`` (the secret) only when it was just created or rotated."""

    id: str
    name: str
    principal: str
    scopes: list[str] | None
    expires_at: str | None
    revoked_at: str | None
    key: str | None
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Key:
        return cls(
            body["id"],
            body["name"],
            body["principal"],
            body.get("scopes"),
            body.get("expires_at"),
            body.get("revoked_at"),
            body.get("key"),
            body,
        )


@dataclass(frozen=True)
class Price:
    id: int
    model: str
    version: str | None
    unit: str
    unit_price_micros: int
    per_units: int
    effective_from: str
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Price:
        return cls(
            body["id"],
            body["model"],
            body["version"],
            body["unit"],
            body["unit_price_micros"],
            body["per_units"],
            body["effective_from"],
            body,
        )


@dataclass(frozen=True)
class Limits:
    """A scope's limits (None: not limited)."""

    scope_type: str
    scope_id: str
    rpm: int | None
    concurrency: int | None
    tpm: int | None
    raw: Json = field(repr=False)
    jobs: int | None = None
    """A tenant's jobs queued and running at once."""
    job_concurrency: int | None = None
    """A tenant's jobs running at once."""

    @classmethod
    def from_json(cls, body: Json) -> Limits:
        return cls(
            body["scope_type"],
            body["scope_id"],
            body["rpm"],
            body["concurrency"],
            body["tpm"],
            body,
            body.get("jobs"),
            body.get("job_concurrency"),
        )


@dataclass(frozen=True)
class Grant:
    id: int
    namespace: str
    model: str | None
    grantee: str
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Grant:
        return cls(body["id"], body["namespace"], body["model"], body["grantee"], body)


@dataclass(frozen=True)
class Asset:
    """A dataset or prompt template found in the catalog (``GET /api/assets``); a page's
    ``raw`` also holds the ``total`` and the ``facets``."""

    kind: str
    owner: str
    name: str
    visibility: str
    description: str
    latest: Json | None
    """The newest version's ``version``, ``task`` and ``license`` (None: no version yet)."""
    raw: Json = field(repr=False)

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}"

    @classmethod
    def from_json(cls, body: Json) -> Asset:
        return cls(
            body["kind"],
            body["owner"],
            body["name"],
            body["visibility"],
            body["description"],
            body.get("latest"),
            body,
        )


@dataclass(frozen=True)
class Invoice:
    id: int
    tenant: str
    period: str
    status: str
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Invoice:
        return cls(body["id"], body["tenant"], body["period"], body["status"], body)


@dataclass(frozen=True)
class LoadStatus:
    """A version loaded into the serving host (``state`` READY once it answers)."""

    model: str
    version: str
    state: str
    phases: Json
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> LoadStatus:
        return cls(body["name"], body["version"], body["state"], body.get("phases") or {}, body)


@dataclass(frozen=True)
class Unloaded:
    versions: list[str]
    raw: Json = field(repr=False)

    @classmethod
    def from_json(cls, body: Json) -> Unloaded:
        return cls([f"{u['name']}:{u['version']}" for u in body["unloaded"]], body)


@dataclass(frozen=True)
class InferResult:
    """A prediction: ``outputs`` by name as numpy arrays (BYTES as arrays of ``str``)."""

    model_name: str
    model_version: str | None
    id: str | None
    outputs: dict[str, np.ndarray]
    raw: Json = field(repr=False)


JOB_TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


@dataclass(frozen=True)
class Job:
    """A job: its state, stages (``raw["stages"]``) and, once it succeeded, outputs."""

    id: str
    state: str
    target: Json
    error: Json | None
    stages: list[Json]
    outputs: list[Json] | None
    raw: Json = field(repr=False)

    @property
    def finished(self) -> bool:
        return self.state in JOB_TERMINAL

    @property
    def stages_done(self) -> int:
        return sum(1 for stage in self.stages if stage["state"] == "done")

    @property
    def output_digest(self) -> str | None:
        digest = self.raw.get("output_digest")
        return digest if isinstance(digest, str) else None

    @property
    def output(self) -> Json | None:
        """The output's ``digest``, ``size``, whether it is ``inline`` and its signed,
        expiring ``url`` (None until the job succeeded)."""
        found = self.raw.get("output")
        return found if isinstance(found, dict) else None

    @property
    def progress(self) -> Json | None:
        """A batch job's ``rows_total``, ``rows_done``, ``rows_failed`` and
        ``estimated_completion`` (None for other jobs)."""
        found = self.raw.get("progress")
        return found if isinstance(found, dict) else None

    @classmethod
    def from_json(cls, body: Json) -> Job:
        return cls(
            body["id"],
            body["state"],
            body["target"],
            body.get("error"),
            list(body.get("stages", [])),
            body.get("outputs"),
            body,
        )
