"""Who lends a blob: a query over the registry's versions and the blobs' holders.

Both the registry (may a version list this blob?) and tenancy (may this caller read it?)
ask it, so it lives here, below both, rather than in one service's repository.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from modelport.store.tables import BlobOwnerRow, ModelRow, ModelVersionRow, VersionFileRow


def blob_lenders(session: Session, digests: Iterable[str]) -> dict[str, list[tuple[str, str, str]]]:
    """For each digest, (owner, name, visibility) of the models with a version listing it
    whose owner holds the blob itself (uploaded it). Those versions are the only ways to
    a blob for anyone but its holders: reading it, or listing it in a version of one's
    own, needs read access to one of them, checked at that moment."""
    wanted = set(digests)
    if not wanted:
        return {}
    stmt = (
        select(VersionFileRow.digest, ModelRow.owner, ModelRow.name, ModelRow.visibility)
        .join(ModelVersionRow, VersionFileRow.version_id == ModelVersionRow.id)
        .join(ModelRow, ModelVersionRow.model_id == ModelRow.id)
        .join(
            BlobOwnerRow,
            (BlobOwnerRow.digest == VersionFileRow.digest)
            & (BlobOwnerRow.tenant == ModelRow.owner),
        )
        .where(VersionFileRow.digest.in_(wanted))
        .distinct()
    )
    lenders: dict[str, list[tuple[str, str, str]]] = {}
    for digest, owner, name, visibility in session.execute(stmt):
        lenders.setdefault(digest, []).append((owner, name, visibility))
    return lenders
