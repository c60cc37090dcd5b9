"""Plain records of the registry (frozen, no I/O). Repositories return these, never rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from modelport.manifest import Manifest


class Visibility(StrEnum):
    PUBLIC = "public"
    PRIVATE = "private"


class LifecycleState(StrEnum):
    CANDIDATE = "candidate"
    VALIDATED = "validated"
    APPROVED = "approved"
    DEPLOYED = "deployed"
    DEPRECATED = "deprecated"
    ARCHIVED = "archived"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Model:
    owner: str
    name: str
    task: str
    description: str
    license: str
    visibility: Visibility
    tags: tuple[str, ...]
    created_at: datetime
    created_by: str

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class ModelVersion:
    """An immutable version; ``state`` is derived from its latest lifecycle event."""

    owner: str
    name: str
    version: str
    manifest: Manifest
    manifest_digest: str
    state: LifecycleState
    created_at: datetime
    created_by: str

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}:{self.version}"

    @property
    def model_ref(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def format(self) -> str:
        return self.manifest.format


@dataclass(frozen=True)
class LifecycleEvent:
    from_state: LifecycleState | None
    to_state: LifecycleState
    actor: str
    reason: str
    created_at: datetime


@dataclass(frozen=True)
class ValidationReport:
    passed: bool
    report: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class FormatDecision:
    """An operator's acceptance of a format the platform does not run (see
    ``modelport.registry.formats``)."""

    format: str
    reason: str
    decided_by: str
    decided_at: datetime


@dataclass(frozen=True)
class Signature:
    key_id: str
    public_key: bytes
    signature: bytes
    signer: str
    verified: bool
    created_at: datetime


@dataclass(frozen=True)
class Alias:
    alias: str
    version: str
    updated_at: datetime


@dataclass(frozen=True)
class AliasEvent:
    alias: str
    version: str | None
    previous_version: str | None
    actor: str
    created_at: datetime


@dataclass(frozen=True)
class LineageNode:
    owner: str
    name: str
    version: str
    relation: str
    license: str
    depth: int


@dataclass(frozen=True)
class Lineage:
    version: ModelVersion
    ancestors: tuple[LineageNode, ...] = field(default_factory=tuple)
    descendants: tuple[LineageNode, ...] = field(default_factory=tuple)

    @property
    def ancestor_licenses(self) -> tuple[str, ...]:
        """Distinct manifest licenses of all ancestors, sorted."""
        return tuple(sorted({node.license for node in self.ancestors}))


@dataclass(frozen=True)
class CatalogViewer:
    """Who is browsing: they see public models, their tenant's, and what was shared with it."""

    tenant: str | None = None
    namespaces: frozenset[str] = frozenset()
    """Namespaces whose private models were shared with the viewer's tenant."""
    models: frozenset[tuple[str, str]] = frozenset()
    """Single private models (owner, name) shared with the viewer's tenant."""


@dataclass(frozen=True)
class CatalogQuery:
    """Catalog filters; every given filter must match. ``cursor`` is opaque."""

    q: str | None = None
    task: str | None = None
    license: str | None = None
    tag: str | None = None
    owner: str | None = None
    format: str | None = None
    price: str | None = None
    """A price band (``modelport.registry.facets.PRICE_BANDS``)."""
    score: str | None = None
    """A score bucket (``modelport.registry.scores.SCORE_BUCKETS``)."""
    min_score: float | None = None
    """The least verified leaderboard score (the most, for a metric better lower)."""
    limit: int = 50
    cursor: str | None = None
    viewer: CatalogViewer | None = None
    """Only what this viewer may see; None: everything (the platform admin)."""
    facets: bool = False
    """Count the matches by facet too (always done when ``q`` is given)."""


@dataclass(frozen=True)
class FacetCount:
    value: str
    count: int


@dataclass(frozen=True)
class CatalogPage:
    items: tuple[Model, ...]
    next_cursor: str | None
    facets: dict[str, tuple[FacetCount, ...]] | None = None
    """Per facet (task, format, license, price, score), the matches by value; None unless
    asked."""
    total: int | None = None
    """How many models match (with ``facets``)."""
    suggestions: tuple[str, ...] = ()
    """Queries close to ``q`` that find something, when ``q`` found nothing."""
