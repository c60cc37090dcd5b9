"""Registry queries. Each function takes a ``Session`` and returns frozen records.

Rows never leave this module; integer ids do, so that the service can chain
calls inside one transaction without looking a model or version up twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from modelport.digests import sha256_digest
from modelport.errors import NotFound
from modelport.manifest import Manifest, stored_manifest
from modelport.registry import signing
from modelport.registry.errors import model_not_found
from modelport.registry.types import (
    Alias,
    AliasEvent,
    LifecycleEvent,
    LifecycleState,
    LineageNode,
    Model,
    ModelVersion,
    Signature,
    ValidationReport,
    Visibility,
)
from modelport.store.base import utcnow
from modelport.store.tables import (
    AliasEventRow,
    AliasRow,
    LifecycleEventRow,
    LineageEdgeRow,
    ModelRow,
    ModelTagRow,
    ModelVersionRow,
    SignatureRow,
    ValidationReportRow,
    VersionFileRow,
)

# ---- models ------------------------------------------------------------------


def model_record(row: ModelRow, tags: Iterable[str]) -> Model:
    return Model(
        owner=row.owner,
        name=row.name,
        task=row.task,
        description=row.description,
        license=row.license,
        visibility=Visibility(row.visibility),
        tags=tuple(sorted(tags)),
        created_at=row.created_at,
        created_by=row.created_by,
    )


def model_id(session: Session, owner: str, name: str, *, lock: bool = False) -> int:
    """Id of ``owner/name``; ``lock`` holds the model row until the transaction ends."""
    stmt = select(ModelRow.id).where(ModelRow.owner == owner, ModelRow.name == name)
    if lock:
        stmt = stmt.with_for_update()
    found = session.scalar(stmt)
    if found is None:
        raise model_not_found(owner, name)
    return found


def get_model(session: Session, owner: str, name: str) -> Model:
    row = session.scalar(select(ModelRow).where(ModelRow.owner == owner, ModelRow.name == name))
    if row is None:
        raise model_not_found(owner, name)
    return model_record(row, tags_of(session, [row.id]).get(row.id, ()))


def tags_of(session: Session, model_ids: list[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    if not model_ids:
        return out
    rows = session.execute(
        select(ModelTagRow.model_id, ModelTagRow.tag).where(ModelTagRow.model_id.in_(model_ids))
    )
    for mid, tag in rows:
        out.setdefault(mid, []).append(tag)
    return out


def insert_model(
    session: Session,
    *,
    owner: str,
    name: str,
    task: str,
    description: str,
    license: str,
    visibility: Visibility,
    tags: tuple[str, ...],
    actor: str,
) -> Model:
    """Insert a model; a duplicate ``owner/name`` raises ``IntegrityError`` at flush."""
    row = ModelRow(
        owner=owner,
        name=name,
        task=task,
        description=description,
        license=license,
        visibility=visibility.value,
        created_at=utcnow(),
        created_by=actor,
    )
    session.add(row)
    session.flush()
    session.add_all(ModelTagRow(model_id=row.id, tag=tag) for tag in tags)
    session.flush()
    return model_record(row, tags)


# ---- versions ----------------------------------------------------------------


def version_not_found(owner: str, name: str, version: str) -> NotFound:
    return NotFound(
        f"version {owner}/{name}:{version} not found",
        code="version_not_found",
        model=f"{owner}/{name}",
        version=version,
    )


def _version_record(
    row: ModelVersionRow, owner: str, name: str, state: LifecycleState
) -> ModelVersion:
    return ModelVersion(
        owner=owner,
        name=name,
        version=row.version,
        manifest=stored_manifest(row.manifest),
        manifest_digest=row.manifest_digest,
        state=state,
        created_at=row.created_at,
        created_by=row.created_by,
    )


def find_version_id(
    session: Session, model: int, version: str, *, lock: bool = False
) -> int | None:
    stmt = select(ModelVersionRow.id).where(
        ModelVersionRow.model_id == model, ModelVersionRow.version == version
    )
    if lock:
        stmt = stmt.with_for_update()
    return session.scalar(stmt)


def version_id(session: Session, owner: str, name: str, version: str, *, lock: bool = False) -> int:
    """Id of ``owner/name:version`` (NotFound ``model_not_found`` / ``version_not_found``)."""
    found = find_version_id(session, model_id(session, owner, name), version, lock=lock)
    if found is None:
        raise version_not_found(owner, name, version)
    return found


def version_by_id(session: Session, vid: int) -> ModelVersion:
    row = session.execute(
        select(ModelVersionRow, ModelRow.owner, ModelRow.name)
        .join(ModelRow, ModelRow.id == ModelVersionRow.model_id)
        .where(ModelVersionRow.id == vid)
    ).one()
    version, owner, name = row
    return _version_record(version, owner, name, current_state(session, vid))


def version_digest(session: Session, vid: int) -> tuple[str, str]:
    """(manifest digest, canonical manifest text) of a version."""
    digest, text = session.execute(
        select(ModelVersionRow.manifest_digest, ModelVersionRow.manifest).where(
            ModelVersionRow.id == vid
        )
    ).one()
    return digest, text


def list_versions(session: Session, owner: str, name: str) -> list[ModelVersion]:
    """All versions of a model, oldest first."""
    mid = model_id(session, owner, name)
    rows = list(
        session.scalars(
            select(ModelVersionRow)
            .where(ModelVersionRow.model_id == mid)
            .order_by(ModelVersionRow.id)
        )
    )
    states = states_of(session, [r.id for r in rows])
    return [_version_record(r, owner, name, states[r.id]) for r in rows]


def version_states(session: Session, model: int) -> list[tuple[int, str, LifecycleState]]:
    """(id, version, state) of every version of a model, oldest first; no manifests parsed."""
    rows = session.execute(
        select(ModelVersionRow.id, ModelVersionRow.version)
        .where(ModelVersionRow.model_id == model)
        .order_by(ModelVersionRow.id)
    ).all()
    states = states_of(session, [r[0] for r in rows])
    return [(vid, version, states[vid]) for vid, version in rows]


def insert_version(
    session: Session,
    *,
    model: int,
    version: str,
    manifest: Manifest,
    digest: str,
    canonical: str,
    actor: str,
) -> int:
    """Insert a version and its file index; a duplicate version raises ``IntegrityError``."""
    row = ModelVersionRow(
        model_id=model,
        version=version,
        manifest_digest=digest,
        manifest=canonical,
        format=manifest.format,
        created_at=utcnow(),
        created_by=actor,
    )
    session.add(row)
    session.flush()
    session.add_all(
        VersionFileRow(version_id=row.id, path=f.path, digest=f.digest, size=f.size)
        for f in manifest.files
    )
    session.flush()
    return row.id


# ---- lifecycle ---------------------------------------------------------------


def states_of(session: Session, version_ids: list[int]) -> dict[int, LifecycleState]:
    """Current state (latest event) of each version."""
    if not version_ids:
        return {}
    latest = (
        select(func.max(LifecycleEventRow.id))
        .where(LifecycleEventRow.version_id.in_(version_ids))
        .group_by(LifecycleEventRow.version_id)
    )
    rows = session.execute(
        select(LifecycleEventRow.version_id, LifecycleEventRow.to_state).where(
            LifecycleEventRow.id.in_(latest)
        )
    )
    return {vid: LifecycleState(state) for vid, state in rows}


def current_state(session: Session, vid: int) -> LifecycleState:
    state = session.scalar(
        select(LifecycleEventRow.to_state)
        .where(LifecycleEventRow.version_id == vid)
        .order_by(LifecycleEventRow.id.desc())
        .limit(1)
    )
    if state is None:  # every version gets its first event in the publishing transaction
        raise RuntimeError(f"version {vid} has no lifecycle event")
    return LifecycleState(state)


def _event_record(row: LifecycleEventRow) -> LifecycleEvent:
    return LifecycleEvent(
        from_state=LifecycleState(row.from_state) if row.from_state else None,
        to_state=LifecycleState(row.to_state),
        actor=row.actor,
        reason=row.reason,
        created_at=row.created_at,
    )


def append_event(
    session: Session,
    vid: int,
    from_state: LifecycleState | None,
    to_state: LifecycleState,
    *,
    actor: str,
    reason: str,
) -> LifecycleEvent:
    row = LifecycleEventRow(
        version_id=vid,
        from_state=from_state.value if from_state else None,
        to_state=to_state.value,
        actor=actor,
        reason=reason,
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return _event_record(row)


def list_events(session: Session, vid: int) -> list[LifecycleEvent]:
    rows = session.scalars(
        select(LifecycleEventRow)
        .where(LifecycleEventRow.version_id == vid)
        .order_by(LifecycleEventRow.id)
    )
    return [_event_record(r) for r in rows]


# ---- validation reports ------------------------------------------------------


def add_report(session: Session, vid: int, report: dict[str, Any]) -> ValidationReport:
    row = ValidationReportRow(
        version_id=vid, passed=bool(report["passed"]), report=report, created_at=utcnow()
    )
    session.add(row)
    session.flush()
    return ValidationReport(passed=row.passed, report=row.report, created_at=row.created_at)


def latest_report(session: Session, vid: int) -> ValidationReport | None:
    row = session.scalar(
        select(ValidationReportRow)
        .where(ValidationReportRow.version_id == vid)
        .order_by(ValidationReportRow.id.desc())
        .limit(1)
    )
    if row is None:
        return None
    return ValidationReport(passed=row.passed, report=row.report, created_at=row.created_at)


# ---- signatures --------------------------------------------------------------


def add_signature(
    session: Session, vid: int, *, public_key: bytes, signature: bytes, signer: str
) -> None:
    session.add(
        SignatureRow(
            version_id=vid,
            key_id=signing.key_id(public_key),
            public_key=public_key,
            signature=signature,
            signer=signer,
            created_at=utcnow(),
        )
    )
    session.flush()


def list_signatures(session: Session, vid: int) -> list[Signature]:
    """Signatures of a version, each verified now against the stored manifest.

    ``verified`` needs both: the stored canonical manifest still hashes to the stored
    digest, and the signature over that digest checks out with the stored key.
    """
    digest, text = version_digest(session, vid)
    intact = sha256_digest(text.encode()) == digest
    rows = session.scalars(
        select(SignatureRow).where(SignatureRow.version_id == vid).order_by(SignatureRow.id)
    )
    return [
        Signature(
            key_id=r.key_id,
            public_key=r.public_key,
            signature=r.signature,
            signer=r.signer,
            verified=intact
            and r.key_id == signing.key_id(r.public_key)
            and signing.verify(r.public_key, r.signature, digest),
            created_at=r.created_at,
        )
        for r in rows
    ]


# ---- aliases -----------------------------------------------------------------


def _version_names(session: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows = session.execute(
        select(ModelVersionRow.id, ModelVersionRow.version).where(ModelVersionRow.id.in_(ids))
    )
    return {vid: version for vid, version in rows}


def alias_target(session: Session, model: int, alias: str) -> int | None:
    return session.scalar(
        select(AliasRow.version_id).where(AliasRow.model_id == model, AliasRow.alias == alias)
    )


def list_aliases(session: Session, model: int) -> list[Alias]:
    rows = list(
        session.scalars(select(AliasRow).where(AliasRow.model_id == model).order_by(AliasRow.alias))
    )
    names = _version_names(session, {r.version_id for r in rows})
    return [
        Alias(alias=r.alias, version=names[r.version_id], updated_at=r.updated_at) for r in rows
    ]


def set_alias(session: Session, model: int, alias: str, vid: int, *, actor: str) -> Alias:
    """Point ``alias`` at ``vid`` and record the move. Callers hold the model row lock."""
    now = utcnow()
    row = session.scalar(
        select(AliasRow).where(AliasRow.model_id == model, AliasRow.alias == alias)
    )
    previous = row.version_id if row else None
    if row is None:
        row = AliasRow(model_id=model, alias=alias, version_id=vid, updated_at=now)
        session.add(row)
    else:
        row.version_id = vid
        row.updated_at = now
    _alias_event(session, model, alias, vid, previous, actor, now)
    session.flush()
    return Alias(alias=alias, version=_version_names(session, {vid})[vid], updated_at=now)


def delete_alias(session: Session, model: int, alias: str, *, actor: str) -> bool:
    """Remove an alias (recorded in its history); False if it did not exist."""
    previous = alias_target(session, model, alias)
    if previous is None:
        return False
    session.execute(delete(AliasRow).where(AliasRow.model_id == model, AliasRow.alias == alias))
    _alias_event(session, model, alias, None, previous, actor, utcnow())
    session.flush()
    return True


def _alias_event(
    session: Session,
    model: int,
    alias: str,
    vid: int | None,
    previous: int | None,
    actor: str,
    now: datetime,
) -> None:
    session.add(
        AliasEventRow(
            model_id=model,
            alias=alias,
            version_id=vid,
            previous_version_id=previous,
            actor=actor,
            created_at=now,
        )
    )


def alias_history(session: Session, model: int, alias: str) -> list[AliasEvent]:
    rows = list(
        session.scalars(
            select(AliasEventRow)
            .where(AliasEventRow.model_id == model, AliasEventRow.alias == alias)
            .order_by(AliasEventRow.id)
        )
    )
    ids = {r.version_id for r in rows} | {r.previous_version_id for r in rows}
    names = _version_names(session, {i for i in ids if i is not None})
    return [
        AliasEvent(
            alias=r.alias,
            version=names.get(r.version_id) if r.version_id else None,
            previous_version=names.get(r.previous_version_id) if r.previous_version_id else None,
            actor=r.actor,
            created_at=r.created_at,
        )
        for r in rows
    ]


# ---- lineage -----------------------------------------------------------------


def add_lineage_edges(session: Session, child: int, parents: list[tuple[int, str]]) -> None:
    session.add_all(
        LineageEdgeRow(child_id=child, parent_id=pid, relation=relation)
        for pid, relation in parents
    )
    session.flush()


def walk_lineage(session: Session, vid: int, *, upward: bool) -> list[LineageNode]:
    """Every ancestor (``upward``) or descendant of a version, breadth first.

    Each node appears once, at its smallest depth, with the relation of the edge
    that first reached it. One query per level; published lineage is acyclic
    because parents must exist before their children.
    """
    near, far = (
        (LineageEdgeRow.child_id, LineageEdgeRow.parent_id)
        if upward
        else (LineageEdgeRow.parent_id, LineageEdgeRow.child_id)
    )
    found: dict[int, tuple[int, str]] = {}
    frontier = {vid}
    depth = 0
    while frontier:
        depth += 1
        rows = session.execute(
            select(far, LineageEdgeRow.relation)
            .where(near.in_(frontier))
            .order_by(far, LineageEdgeRow.relation)
        ).all()
        frontier = set()
        for other, relation in rows:
            if other != vid and other not in found:
                found[other] = (depth, relation)
                frontier.add(other)
    if not found:
        return []
    info = session.execute(
        select(ModelVersionRow.id, ModelRow.owner, ModelRow.name, ModelVersionRow.version)
        .join(ModelRow, ModelRow.id == ModelVersionRow.model_id)
        .where(ModelVersionRow.id.in_(found))
    ).all()
    licenses = _manifest_licenses(session, set(found))
    nodes = [
        LineageNode(
            owner=owner,
            name=name,
            version=version,
            relation=found[i][1],
            license=licenses[i],
            depth=found[i][0],
        )
        for i, owner, name, version in info
    ]
    return sorted(nodes, key=lambda n: (n.depth, n.owner, n.name, n.version))


def _manifest_licenses(session: Session, ids: set[int]) -> dict[int, str]:
    rows = session.execute(
        select(ModelVersionRow.id, ModelVersionRow.manifest).where(ModelVersionRow.id.in_(ids))
    )
    return {vid: str(orjson.loads(text)["license"]) for vid, text in rows}
