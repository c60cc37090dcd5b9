"""Dataset queries: the caller's session in, frozen records out (``assets.queries``)."""

from __future__ import annotations

from modelport.assets.queries import AssetQueries
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


QUERIES = AssetQueries(
    DatasetRow, DatasetVersionRow, link="dataset_id", asset_of=_dataset, version_of=_version
)
