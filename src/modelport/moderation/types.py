"""Plain records of content moderation (no I/O): policies, rules, decisions, records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum


class Strictness(StrEnum):
    """How hard a policy moderates (see ``moderation.strictness`` for what each blocks)."""

    OFF = "off"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Severity(IntEnum):
    """How bad a rule's match is; strictness decides what flags and what blocks."""

    LOW = 1
    MEDIUM = 2
    HIGH = 3


class Disposition(StrEnum):
    """A decision's verdict, ordered by how much it stops (``worst``)."""

    ALLOWED = "allowed"
    FLAGGED = "flagged"
    BLOCKED = "blocked"


_RANK = {Disposition.ALLOWED: 0, Disposition.FLAGGED: 1, Disposition.BLOCKED: 2}


def worst(a: Disposition, b: Disposition) -> Disposition:
    return a if _RANK[a] >= _RANK[b] else b


class Stage(StrEnum):
    """What was moderated: a call's input, or the output it produced."""

    INPUT = "input"
    OUTPUT = "output"


@dataclass(frozen=True)
class Rule:
    """Words (whole words, case-insensitive) and regular expressions (case-insensitive)
    of one category, at one severity."""

    category: str
    words: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    severity: Severity = Severity.HIGH


@dataclass(frozen=True)
class Threshold:
    """Classifier scores (0..1) at or above which a category flags, and blocks."""

    flag: float
    block: float


@dataclass(frozen=True)
class PolicyDraft:
    """What a tenant sets; stored as the next version of its policy."""

    strictness: Strictness = Strictness.MEDIUM
    rules: tuple[Rule, ...] = ()
    classifier: str | None = None
    """A classifier model, ``owner/name`` or ``owner/name:version``: one BYTES input (the
    texts), one score output (FP32, 0..1, one per text) per category, named by it."""
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    """Per category, replacing the strictness's default thresholds for the classifier."""
    sync: bool = False
    """Whether synchronous calls (``/v1``, ``/v2``) are moderated too (jobs always are)."""


@dataclass(frozen=True)
class Policy(PolicyDraft):
    """One stored version of a tenant's policy."""

    tenant: str = ""
    id: str = ""
    """The tenant's policy, the same across its versions."""
    version: int = 0
    created_at: datetime | None = None
    created_by: str = ""

    @property
    def active(self) -> bool:
        """Whether it moderates anything at all."""
        return self.strictness is not Strictness.OFF and bool(self.rules or self.classifier)


@dataclass(frozen=True)
class Decision:
    """A moderator's answer about some texts."""

    disposition: Disposition
    reason: str = ""
    categories: tuple[str, ...] = ()
    """The categories that matched (flagged or blocked)."""
    scores: Mapping[str, float] = field(default_factory=dict)
    """A classifier's highest score per category."""


ALLOWED = Decision(Disposition.ALLOWED)


def combine(decisions: list[Decision]) -> Decision:
    """Several moderators' decisions as one: the worst disposition, every category and
    score, the reasons of those that did not allow."""
    disposition = Disposition.ALLOWED
    categories: list[str] = []
    scores: dict[str, float] = {}
    reasons: list[str] = []
    for decision in decisions:
        disposition = worst(disposition, decision.disposition)
        categories += [c for c in decision.categories if c not in categories]
        scores.update(decision.scores)
        if decision.disposition is not Disposition.ALLOWED and decision.reason:
            reasons.append(decision.reason)
    return Decision(disposition, "; ".join(reasons), tuple(categories), scores)


@dataclass(frozen=True)
class Subject:
    """What a decision is about: whose call, of what, which request or job."""

    tenant: str
    stage: Stage
    model: str = ""
    """``owner/name`` or the endpoint's name."""
    version: str = ""
    request_id: str = ""
    job_id: str | None = None


@dataclass(frozen=True)
class DecisionRecord:
    """One audited decision."""

    id: int
    tenant: str
    stage: Stage
    disposition: Disposition
    reason: str
    categories: tuple[str, ...]
    scores: Mapping[str, float]
    policy_id: str
    policy_version: int
    model: str
    version: str
    request_id: str
    job_id: str | None
    created_at: datetime


@dataclass(frozen=True)
class DecisionQuery:
    tenant: str
    disposition: Disposition | None = None
    stage: Stage | None = None
    model: str | None = None
    request_id: str | None = None
    job_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    cursor: str | None = None


@dataclass(frozen=True)
class DecisionPage:
    items: tuple[DecisionRecord, ...]
    next_cursor: str | None
