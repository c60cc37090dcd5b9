"""Datasets: create one in a tenant's namespace, publish immutable versions, read and
list them as the caller may.

Access follows the models' rule (``tenancy.access``), on a dataset's own facts: its
tenant and the operator decide by roles; another tenant sees a public dataset, or a
private one a grant covers (a grant names a model *or* dataset by its name in the
namespace; a namespace grant covers both), and may only read it. A dataset the caller
may not see is the 404 ``dataset_not_found`` of a missing one. Publishing a version
needs ``model.register`` in the namespace; every split's file must be a blob the
dataset's tenant holds (uploaded through ``/api/uploads``, as model files are), of its
declared size, a Parquet file with exactly the declared columns and rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from modelport.assets.catalog import VISIBILITIES, AssetCatalog
from modelport.blobs.service import BlobService
from modelport.datasets import repository as repo
from modelport.datasets.splits import SplitRows
from modelport.datasets.types import (
    TASKS,
    Dataset,
    DatasetManifest,
    DatasetVersion,
    parse_dataset_manifest,
)
from modelport.errors import InvalidInput
from modelport.jobs.types import SplitInput
from modelport.store import Database
from modelport.tenancy.types import GrantSet, Principal


class DatasetService(AssetCatalog[Dataset, DatasetVersion, DatasetManifest]):
    kind = "dataset"

    def __init__(
        self,
        database: Database,
        blobs: BlobService,
        *,
        grants: Callable[[str], GrantSet],
        now: Callable[[], datetime],
    ) -> None:
        super().__init__(database, repo.QUERIES, grants)
        self.blobs = blobs
        self.now = now

    def parse(self, manifest: object) -> DatasetManifest:
        return parse_dataset_manifest(manifest)

    def license_of(self, parsed: DatasetManifest) -> str:
        return parsed.license

    def task_of(self, version: DatasetVersion) -> str | None:
        return version.task

    def card_of(self, version: DatasetVersion) -> str:
        return version.manifest.description

    def columns(self, parsed: DatasetManifest) -> dict[str, object]:
        return {"task": parsed.task}

    def check(self, asset: Dataset, parsed: DatasetManifest) -> None:
        """Every split's file a blob the dataset's tenant holds, of its declared size, a
        Parquet file with exactly the declared columns and rows."""
        for split in parsed.splits:
            file = split.file
            if not self.blobs.held_by(asset.owner, file.digest):
                raise InvalidInput(
                    f"split {split.name!r}: blob {file.digest} is not held by {asset.owner}: "
                    "upload it first",
                    code="missing_blob",
                    digest=file.digest,
                )
            if self.blobs.stat(file.digest).size != file.size:
                raise InvalidInput(
                    f"split {split.name!r}: blob {file.digest} is not {file.size} bytes",
                    code="blob_size_mismatch",
                    digest=file.digest,
                )
            SplitRows(self.blobs, parsed, split)  # the declared columns and rows, checked

    # ---- a split as a job's input (``jobs.tensor_batch.DatasetSplits``)
    def _split(self, principal: Principal, dataset: str) -> DatasetVersion:
        owner, _, rest = dataset.partition("/")
        name, _, version = rest.partition(":")
        if not (owner and name and version):
            raise InvalidInput(
                f"a dataset is named owner/name:version, not {dataset[:200]!r}",
                code="invalid_dataset_ref",
                field="input_dataset.dataset",
            )
        return self.version(principal, owner, name, version)

    def split_input(self, principal: Principal, dataset: str, split: str) -> SplitInput:
        """The split ``split`` of the version ``dataset`` the caller may read (404 where it
        may not, 400 ``unknown_split``)."""
        found = self._split(principal, dataset)
        entry = found.manifest.split(split)
        return SplitInput(
            dataset=found.ref,
            digest=found.digest,
            split=entry.name,
            file_digest=entry.file.digest,
            features=tuple((c.name, c.datatype, tuple(c.shape)) for c in found.manifest.features),
        )

    def split_reader(self, principal: Principal, dataset: str, split: str) -> SplitRows:
        """The split's rows, read as the caller (blocking)."""
        found = self._split(principal, dataset)
        return SplitRows(self.blobs, found.manifest, found.manifest.split(split))

    def listing(
        self, principal: Principal, *, owner: str | None = None, task: str | None = None
    ) -> list[tuple[Dataset, DatasetVersion | None]]:
        """The datasets the caller may see (of ``task``), each with its latest version."""
        return [
            (d, v)
            for d, v in self.visible_listing(principal, owner)
            if task is None or (v is not None and v.task == task)
        ]


__all__ = ["TASKS", "VISIBILITIES", "DatasetService"]
