"""A dataset split's Parquet file read as arrays, a range of rows at a time
(``jobs.parquet``: only the row groups a range spans are decoded)."""

from __future__ import annotations

import numpy as np

from modelport.blobs.service import BlobService
from modelport.datasets.types import DatasetColumn, DatasetManifest, DatasetSplit
from modelport.errors import InvalidInput
from modelport.jobs import parquet
from modelport.manifest import TensorSpec


def column_spec(column: DatasetColumn) -> TensorSpec:
    """A column as the tensor it feeds: dimension 0 the rows, then one row's shape."""
    return TensorSpec(name=column.name, datatype=column.datatype, shape=[-1, *column.shape])


class SplitRows:
    """A split's rows (blocking: use on a worker thread)."""

    def __init__(self, blobs: BlobService, manifest: DatasetManifest, split: DatasetSplit) -> None:
        specs = [column_spec(c) for c in manifest.columns]
        source = parquet.open_blob(blobs, split.file.digest)
        try:
            self._rows = parquet.ParquetRows(source, specs, texts=True)
        except InvalidInput as exc:
            raise InvalidInput(
                f"split {split.name!r} does not hold the declared columns: {exc.message}",
                code="dataset_columns_mismatch",
                split=split.name,
            ) from None
        if self._rows.rows != split.rows:
            raise InvalidInput(
                f"split {split.name!r} holds {self._rows.rows} rows, not the {split.rows} declared",
                code="dataset_columns_mismatch",
                split=split.name,
            )

    @property
    def rows(self) -> int:
        return int(self._rows.rows)

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        return self._rows.read(start, stop)
