"""Moderation's queries: policy versions and decision records. Rows stay here; callers
get frozen records."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.errors import Conflict, InvalidInput
from modelport.moderation.types import (
    Decision,
    DecisionPage,
    DecisionQuery,
    DecisionRecord,
    Disposition,
    Policy,
    PolicyDraft,
    Rule,
    Severity,
    Stage,
    Strictness,
    Subject,
    Threshold,
)
from modelport.store.cursors import IdCursor
from modelport.store.tables import ModerationDecisionRow, ModerationPolicyRow

MAX_LIMIT = 500
_CURSOR = IdCursor(b"md:")


# ---- policies
def current_policy(session: Session, tenant: str) -> Policy | None:
    """The tenant's policy in force (its highest version), None if it never set one."""
    row = session.scalars(
        select(ModerationPolicyRow)
        .where(ModerationPolicyRow.tenant == tenant)
        .order_by(ModerationPolicyRow.version.desc())
        .limit(1)
    ).first()
    return None if row is None else _policy(row)


def policy_version(session: Session, tenant: str, version: int) -> Policy | None:
    row = session.get(ModerationPolicyRow, (tenant, version))
    return None if row is None else _policy(row)


def policy_versions(session: Session, tenant: str) -> list[Policy]:
    rows = session.scalars(
        select(ModerationPolicyRow)
        .where(ModerationPolicyRow.tenant == tenant)
        .order_by(ModerationPolicyRow.version)
    )
    return [_policy(row) for row in rows]


def add_policy_version(
    session: Session, tenant: str, draft: PolicyDraft, actor: str, now: datetime
) -> Policy:
    """Store ``draft`` as the tenant's next policy version (409 ``policy_changed`` when
    another change took that version first)."""
    last = session.scalars(
        select(ModerationPolicyRow)
        .where(ModerationPolicyRow.tenant == tenant)
        .order_by(ModerationPolicyRow.version.desc())
        .limit(1)
    ).first()
    row = ModerationPolicyRow(
        tenant=tenant,
        version=1 if last is None else last.version + 1,
        policy_id=("mp_" + secrets.token_hex(8)) if last is None else last.policy_id,
        strictness=draft.strictness.value,
        rules=[_rule_json(rule) for rule in draft.rules],
        classifier=draft.classifier,
        thresholds={k: {"flag": t.flag, "block": t.block} for k, t in draft.thresholds.items()},
        sync=draft.sync,
        created_at=now,
        created_by=actor,
    )
    session.add(row)
    try:
        session.flush()
    except IntegrityError:
        raise Conflict(
            "the policy changed meanwhile: read it and try again", code="policy_changed"
        ) from None
    return _policy(row)


def _rule_json(rule: Rule) -> dict[str, Any]:
    return {
        "category": rule.category,
        "words": list(rule.words),
        "patterns": list(rule.patterns),
        "severity": rule.severity.name.lower(),
    }


def _policy(row: ModerationPolicyRow) -> Policy:
    rules = tuple(
        Rule(
            category=str(r["category"]),
            words=tuple(r.get("words") or ()),
            patterns=tuple(r.get("patterns") or ()),
            severity=Severity[str(r.get("severity", "high")).upper()],
        )
        for r in row.rules
    )
    thresholds: Mapping[str, Threshold] = {
        k: Threshold(flag=float(v["flag"]), block=float(v["block"]))
        for k, v in row.thresholds.items()
    }
    return Policy(
        strictness=Strictness(row.strictness),
        rules=rules,
        classifier=row.classifier,
        thresholds=thresholds,
        sync=row.sync,
        tenant=row.tenant,
        id=row.policy_id,
        version=row.version,
        created_at=row.created_at,
        created_by=row.created_by,
    )


# ---- decisions
def add_decision(
    session: Session, subject: Subject, policy: Policy, decision: Decision, now: datetime
) -> DecisionRecord:
    row = ModerationDecisionRow(
        tenant=subject.tenant,
        stage=subject.stage.value,
        disposition=decision.disposition.value,
        reason=decision.reason,
        categories=list(decision.categories),
        scores=dict(decision.scores),
        policy_id=policy.id,
        policy_version=policy.version,
        model=subject.model,
        version=subject.version,
        request_id=subject.request_id,
        job_id=subject.job_id,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return _decision(row)


def search_decisions(session: Session, query: DecisionQuery) -> DecisionPage:
    """One page of the tenant's decisions, newest first."""
    if not 1 <= query.limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {MAX_LIMIT}", code="invalid_limit", field="limit"
        )
    table = ModerationDecisionRow
    stmt = (
        select(table)
        .where(table.tenant == query.tenant)
        .order_by(table.id.desc())
        .limit(query.limit + 1)
    )
    if query.cursor:
        stmt = stmt.where(table.id < _CURSOR.decode(query.cursor))
    if query.disposition is not None:
        stmt = stmt.where(table.disposition == query.disposition.value)
    if query.stage is not None:
        stmt = stmt.where(table.stage == query.stage.value)
    if query.model is not None:
        stmt = stmt.where(table.model == query.model)
    if query.request_id is not None:
        stmt = stmt.where(table.request_id == query.request_id)
    if query.job_id is not None:
        stmt = stmt.where(table.job_id == query.job_id)
    if query.since is not None:
        stmt = stmt.where(table.created_at >= query.since)
    if query.until is not None:
        stmt = stmt.where(table.created_at < query.until)
    rows = list(session.scalars(stmt))
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    return DecisionPage(
        items=tuple(_decision(r) for r in rows),
        next_cursor=_CURSOR.encode(rows[-1].id) if more else None,
    )


def count_decisions(session: Session, tenant: str) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(ModerationDecisionRow)
            .where(ModerationDecisionRow.tenant == tenant)
        )
        or 0
    )


def _decision(row: ModerationDecisionRow) -> DecisionRecord:
    return DecisionRecord(
        id=row.id,
        tenant=row.tenant,
        stage=Stage(row.stage),
        disposition=Disposition(row.disposition),
        reason=row.reason,
        categories=tuple(row.categories),
        scores={k: float(v) for k, v in row.scores.items()},
        policy_id=row.policy_id,
        policy_version=row.policy_version,
        model=row.model,
        version=row.version,
        request_id=row.request_id,
        job_id=row.job_id,
        created_at=row.created_at,
    )
