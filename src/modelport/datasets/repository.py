"""Dataset queries: the caller's session in, frozen records out."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from modelport.datasets.types import Dataset, DatasetVersion, parse_dataset_manifest
from modelport.store.tables import DatasetRow, DatasetVersionRow


def _dataset(row: DatasetRow) -> Dataset:
    return Dataset(
        row.owner, row.name, row.visibility, row.description, row.created_at, row.created_by
    )


def _version(dataset: DatasetRow, row: DatasetVersionRow) -> DatasetVersion:
    return DatasetVersion(
        owner=dataset.owner,
        name=dataset.name,
        version=row.version,
        digest=row.digest,
        task=row.task,
        license=row.license,
        manifest=parse_dataset_manifest(row.manifest),
        created_at=row.created_at,
        created_by=row.created_by,
    )


def _row(session: Session, owner: str, name: str) -> DatasetRow | None:
    return session.scalar(
        select(DatasetRow).where(DatasetRow.owner == owner, DatasetRow.name == name)
    )


def find(session: Session, owner: str, name: str) -> Dataset | None:
    row = _row(session, owner, name)
    return None if row is None else _dataset(row)


def insert(
    session: Session, owner: str, name: str, *, visibility: str, description: str, actor: str
) -> Dataset:
    row = DatasetRow(
        owner=owner, name=name, visibility=visibility, description=description, created_by=actor
    )
    session.add(row)
    session.flush()
    return _dataset(row)


def find_version(session: Session, owner: str, name: str, version: str) -> DatasetVersion | None:
    found = session.execute(
        select(DatasetRow, DatasetVersionRow)
        .join(DatasetVersionRow, DatasetVersionRow.dataset_id == DatasetRow.id)
        .where(
            DatasetRow.owner == owner,
            DatasetRow.name == name,
            DatasetVersionRow.version == version,
        )
    ).first()
    return None if found is None else _version(found[0], found[1])


def insert_version(
    session: Session,
    owner: str,
    name: str,
    version: str,
    *,
    digest: str,
    task: str,
    license: str,
    manifest: dict[str, object],
    actor: str,
) -> None:
    dataset = _row(session, owner, name)
    assert dataset is not None
    session.add(
        DatasetVersionRow(
            dataset_id=dataset.id,
            version=version,
            digest=digest,
            task=task,
            license=license,
            manifest=manifest,
            created_by=actor,
        )
    )
    session.flush()


def versions(session: Session, owner: str, name: str) -> list[DatasetVersion]:
    rows = session.execute(
        select(DatasetRow, DatasetVersionRow)
        .join(DatasetVersionRow, DatasetVersionRow.dataset_id == DatasetRow.id)
        .where(DatasetRow.owner == owner, DatasetRow.name == name)
        .order_by(DatasetVersionRow.id)
    ).all()
    return [_version(d, v) for d, v in rows]


def listing(
    session: Session, owner: str | None = None
) -> list[tuple[Dataset, DatasetVersion | None]]:
    """Every dataset (of ``owner``) with its latest version, by owner and name."""
    query = select(DatasetRow).order_by(DatasetRow.owner, DatasetRow.name)
    if owner is not None:
        query = query.where(DatasetRow.owner == owner)
    rows = list(session.scalars(query))
    latest: dict[int, DatasetVersionRow] = {}
    if rows:
        for version in session.scalars(
            select(DatasetVersionRow)
            .where(DatasetVersionRow.dataset_id.in_([r.id for r in rows]))
            .order_by(DatasetVersionRow.id)
        ):
            latest[version.dataset_id] = version
    return [(_dataset(r), _version(r, latest[r.id]) if r.id in latest else None) for r in rows]
