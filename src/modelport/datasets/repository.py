"""Dataset queries: the caller's session in, frozen records out (``assets.queries``)."""

from __future__ import annotations

from modelport.assets.queries import AssetQueries
from modelport.assets.records import record_of
from modelport.datasets.types import DatasetVersion, parse_dataset_manifest
from modelport.store.tables import DatasetRow, DatasetVersionRow


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
    DatasetRow, DatasetVersionRow, link="dataset_id", asset_of=record_of, version_of=_version
)
