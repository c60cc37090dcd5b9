"""Tensor batches: a ``.npy`` or Parquet file of rows scored against a tensor model or
endpoint.

A job submitted with the pipeline ``TENSOR_BATCH_PIPELINE`` (``POST /api/jobs`` with
``input_digest`` the file's digest and ``pipeline`` naming ``tensor_shards`` then
``tensor_publish``) runs:

- ``tensor_shards`` (``params``: ``shard_rows``, default 1,000; for a ``.npy`` file
  ``input``, the model's input to feed, default its only one; ``output``, the output to
  keep, default the first for ``.npy`` and every one for Parquet): each shard of rows
  not checkpointed yet is one ``InferenceService.infer`` call, as the submitting
  principal at offline priority under the metered call id ``batch:<job>:<shard>``, its
  output stored as a blob in the input's format (``.npy`` of the one output, or Parquet
  with a column per output) and the shard checkpointed (``batch_shards``). A run resumed
  after a kill starts at the first shard not checkpointed; a shard cut by the kill runs
  again and is charged once.
- ``tensor_publish``: the output manifest (every shard's rows and digest, in order),
  recorded by the runner as the job's output: published at once, when all shards are
  done.

A Parquet file (told from a ``.npy`` one by its magic) has a column per input, read a
shard at a time (``jobs.parquet``); a ``.npy`` file is one input's array, each shard
read by a ranged read (``jobs.readers.NpyRows``).

Or the rows are a dataset split (``params``: ``dataset`` ``owner/name:version``,
``split``, and ``dataset_digest``, the version's digest, set at submission): its feature
columns feed the target's inputs by name, as an evaluation's do, and its outputs are
Parquet. The split is read as the submitter again when the stage runs (a grant
withdrawn since stops it: 404 ``dataset_not_found``); feature columns that are not the
target's inputs fail the job with ``column_mismatch``.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Protocol

import anyio.to_thread
import numpy as np

from modelport.blobs.service import BlobService
from modelport.errors import InvalidInput
from modelport.inference.types import Caller, InferenceRequest, InferenceResult
from modelport.jobs import parquet, readers, shards, tensors
from modelport.jobs.batch import SHARD_ROWS
from modelport.jobs.dataset_input import check_features
from modelport.jobs.repository import get_job
from modelport.jobs.stages import StageContext, declared, parse_target
from modelport.jobs.types import DatasetSplits, ShardCheckpoint, SplitReader, StageSpec
from modelport.manifest import TensorSpec
from modelport.runtime.types import Priority
from modelport.store.database import Database
from modelport.tenancy.types import Principal

TENSOR_BATCH_PIPELINE = (
    StageSpec("shards", "tensor_shards", retries=2, timeout_seconds=24 * 3600.0),
    StageSpec("publish", "tensor_publish", retries=2),
)


def npy_bytes(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def _pick(specs: Sequence[TensorSpec], name: Any, what: str) -> str:
    names = [spec.name for spec in specs]
    if name is None:
        if what == "input" and len(names) != 1:
            raise InvalidInput(
                f"the target takes {len(names)} inputs: name one ('params.input')",
                code="invalid_params",
            )
        return names[0]
    if name not in names:
        raise InvalidInput(f"unknown {what} {name!r}; there are {names}", code="invalid_params")
    return str(name)


class Rows(Protocol):
    """A batch file's rows, read a range at a time as the target's input arrays."""

    @property
    def format(self) -> str:
        """``npy`` or ``parquet``: also the format of the shards' outputs."""
        ...

    @property
    def rows(self) -> int: ...

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs each shard keeps."""
        ...

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]: ...

    def encode(self, outputs: Mapping[str, np.ndarray]) -> bytes: ...


@dataclass
class NpyRows:
    """A ``.npy`` file: one input's array, each shard's rows fetched by a ranged read."""

    source: readers.NpyRows
    input: str
    output: str
    format: str = "npy"

    @property
    def rows(self) -> int:
        return self.source.rows

    @property
    def outputs(self) -> tuple[str, ...]:
        return (self.output,)

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        return {self.input: self.source.read(start, stop)}

    def encode(self, outputs: Mapping[str, np.ndarray]) -> bytes:
        return npy_bytes(np.asarray(outputs[self.output]))


@dataclass
class ParquetBatch:
    """A Parquet file: a column per input, read by shard (``jobs.parquet``)."""

    source: parquet.ParquetRows
    outputs: tuple[str, ...]
    format: str = "parquet"

    @property
    def rows(self) -> int:
        return self.source.rows

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        return self.source.read(start, stop)

    def encode(self, outputs: Mapping[str, np.ndarray]) -> bytes:
        return parquet.write({name: outputs[name] for name in self.outputs})


def open_rows(
    blobs: BlobService,
    digest: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    params: Mapping[str, Any],
) -> Rows:
    """The batch file ``digest`` as rows for the target (blocking: call on a thread)."""
    ranges = blobs.open_ranges(digest)  # verified once, whichever format it is
    if parquet.is_parquet(ranges.read(0, 4)):
        if params.get("input") is not None:
            raise InvalidInput(
                "a Parquet file names its inputs by its columns: drop 'params.input'",
                code="invalid_params",
            )
        asked = params.get("output")
        names = (
            (_pick(outputs, asked, "output"),)
            if asked is not None
            else tuple(spec.name for spec in outputs)
        )
        return ParquetBatch(parquet.ParquetRows(parquet.open_file(ranges), inputs), names)
    # The header now, each shard's rows when it runs: never the whole file.
    return NpyRows(
        readers.NpyRows(ranges),
        _pick(inputs, params.get("input"), "input"),
        _pick(outputs, params.get("output"), "output"),
    )


@dataclass
class SplitBatch:
    """A dataset split: its feature columns, read by shard; outputs as Parquet."""

    source: SplitReader
    features: tuple[str, ...]
    outputs: tuple[str, ...]
    format: str = "parquet"

    @property
    def rows(self) -> int:
        return self.source.rows

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        shard = self.source.read(start, stop)
        return {name: shard[name] for name in self.features}

    def encode(self, outputs: Mapping[str, np.ndarray]) -> bytes:
        return parquet.write({name: outputs[name] for name in self.outputs})


def open_split(
    datasets: DatasetSplits,
    principal: Principal,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    params: Mapping[str, Any],
) -> Rows:
    """The dataset split ``params`` names as rows for the target (blocking)."""
    dataset, split = str(params["dataset"]), str(params.get("split", ""))
    found = datasets.split_input(principal, dataset, split)
    if found.digest != params.get("dataset_digest"):
        raise InvalidInput(
            f"dataset {dataset} is not the version the job was submitted with",
            code="dataset_changed",
        )
    check_features(found, inputs)
    asked = params.get("output")
    names = (
        (_pick(outputs, asked, "output"),)
        if asked is not None
        else tuple(spec.name for spec in outputs)
    )
    reader = datasets.split_reader(principal, dataset, split)
    return SplitBatch(reader, tuple(name for name, _, _ in found.features), names)


class TensorShardStage:
    """The ``tensor_shards`` implementation (see the module docstring)."""

    def __init__(
        self,
        database: Database,
        *,
        now: Callable[[], datetime],
        on_shard_run: Callable[[str, int], None] | None = None,
        datasets: DatasetSplits | None = None,
    ) -> None:
        self.database = database
        self.now = now
        self.datasets = datasets
        """Where a job over a dataset split reads it (None: such a job fails)."""
        self.on_shard_run = on_shard_run
        """Told (job id, position) after each shard's call answered, before its
        checkpoint (tests count shard runs with it)."""

    async def run(self, context: StageContext) -> bytes:
        job, params = context.job, context.spec.params
        size = params.get("shard_rows", SHARD_ROWS)
        if not isinstance(size, int) or not 1 <= size <= 1_000_000:
            raise InvalidInput("shard_rows must be 1 to 1000000", code="invalid_params")
        inference = context.services.inference
        target = parse_target(job.target_kind, job.target)
        inputs, outputs = await declared(inference, context.principal, target)
        blobs = context.services.blobs
        rows: Rows
        if params.get("dataset") is not None:
            if self.datasets is None:
                raise InvalidInput("datasets are not served here", code="invalid_job_input")
            rows = await anyio.to_thread.run_sync(
                open_split, self.datasets, context.principal, inputs, outputs, params
            )
        else:
            rows = await anyio.to_thread.run_sync(
                open_rows, blobs, job.input_digest, inputs, outputs, params
            )
        empty = await anyio.to_thread.run_sync(partial(blobs.put, b"", tenant=job.tenant))
        done = await anyio.to_thread.run_sync(self._done, job.id)
        for position, start in enumerate(range(0, rows.rows, size)):
            if position in done:
                continue
            if await anyio.to_thread.run_sync(self._cancelled, job.id):
                return tensors.dumps({"cancelled": True})
            shard = await anyio.to_thread.run_sync(rows.read, start, start + size)

            async def decode(
                specs: Sequence[TensorSpec],
                _: Sequence[TensorSpec],
                shard: dict[str, np.ndarray] = shard,
            ) -> InferenceRequest:
                return InferenceRequest(
                    inputs=shard,
                    outputs=rows.outputs,
                    timeout=context.spec.timeout_seconds,
                    priority=Priority.OFFLINE,
                )

            caller = Caller(
                context.principal, request_id=job.id, call_id=f"batch:{job.id}:{position}"
            )
            result = await inference.infer(caller, target, decode)
            assert isinstance(result, InferenceResult)  # no idempotency key: never a replay
            if self.on_shard_run is not None:
                self.on_shard_run(job.id, position)
            data = await anyio.to_thread.run_sync(rows.encode, result.outputs)
            digest = await anyio.to_thread.run_sync(partial(blobs.put, data, tenant=job.tenant))
            count = min(size, rows.rows - start)
            checkpoint = ShardCheckpoint(position, count, 0, digest, empty)
            await anyio.to_thread.run_sync(
                shards.checkpoint, self.database, job.id, checkpoint, self.now(), context.lease
            )
        summary: dict[str, Any] = {
            "rows": rows.rows,
            "format": rows.format,
            "outputs": list(rows.outputs),
        }
        if isinstance(rows, NpyRows):
            summary["output"] = rows.output
        if params.get("dataset") is not None:
            summary["dataset"] = {
                "ref": params["dataset"],
                "split": params.get("split"),
                "digest": params.get("dataset_digest"),
            }
        return tensors.dumps(summary)

    def _done(self, job_id: str) -> set[int]:
        with self.database.transaction() as session:
            return {c.position for c in shards.checkpoints(session, job_id)}

    def _cancelled(self, job_id: str) -> bool:
        with self.database.transaction() as session:
            job = get_job(session, job_id, with_stages=False)
        return job is None or job.cancel_requested


class TensorPublishStage:
    """The ``tensor_publish`` implementation: the output manifest."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def run(self, context: StageContext) -> bytes:
        summary = await context.read_input()
        found = await anyio.to_thread.run_sync(self._checkpoints, context.job.id)
        manifest = {
            "rows": sum(c.rows for c in found),
            "format": summary.get("format", "npy"),
            "outputs": summary.get("outputs"),
            "shards": [
                {"index": c.position, "rows": c.rows, "digest": c.output_digest} for c in found
            ],
        }
        for key in ("output", "dataset"):
            if key in summary:
                manifest[key] = summary[key]
        return tensors.dumps(manifest)

    def _checkpoints(self, job_id: str) -> list[ShardCheckpoint]:
        with self.database.transaction() as session:
            return shards.checkpoints(session, job_id)
