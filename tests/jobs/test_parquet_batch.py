"""Parquet tensor batches (``jobs.parquet`` through ``jobs.tensor_batch``): a Parquet file
whose columns are a real two-input ONNX model's inputs, scored shard by shard at offline
priority (shards crossing the file's row groups), the outputs Parquet files with a
column per output; files that do not fit the model are refused with a stable code, and
without pyarrow with ``parquet_unavailable``. On SQLite and PostgreSQL."""

from __future__ import annotations

import io
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelport.jobs.types import JobState
from modelport.metering.types import BalanceScope
from tests.jobs.conftest import Jobs
from tests.metering.conftest import Platform, approve, make_platform

CREDIT = 10_000_000
MODEL = "acme/pair"


def pair_model() -> onnx.ModelProto:
    """sum = a + b (rows of 2); total = the sum of a's row (rank 1)."""
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["a", "b"], ["sum"]),
            helper.make_node("ReduceSum", ["a", "axes"], ["total"], keepdims=0),
        ],
        "pair",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [None, 2]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [None, 2]),
        ],
        [
            helper.make_tensor_value_info("sum", TensorProto.FLOAT, [None, 2]),
            helper.make_tensor_value_info("total", TensorProto.FLOAT, [None]),
        ],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def publish_pair(platform: Platform) -> None:
    public = {"owner": "acme", "name": "pair", "license": "MIT", "visibility": "public"}
    assert platform.client.post("/api/models", json=public).status_code == 201
    platform.publisher.models.add(MODEL)
    platform.publisher.publish(
        MODEL,
        "1",
        pair_model(),
        inputs=[
            {"name": "a", "datatype": "FP32", "shape": [-1, 2]},
            {"name": "b", "datatype": "FP32", "shape": [-1, 2]},
        ],
        outputs=[
            {"name": "sum", "datatype": "FP32", "shape": [-1, 2]},
            {"name": "total", "datatype": "FP32", "shape": [-1]},
        ],
    )
    approve(platform.services, "acme", "pair", "1")


def parquet_bytes(table: pa.Table, row_group_size: int | None = None) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def pair_rows(n: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    return a, a * 10


def pair_table(a: np.ndarray, b: np.ndarray) -> pa.Table:
    """``a`` as fixed-size lists, ``b`` as plain lists: both are rows of 2."""
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), 2)
    return pa.table({"a": fixed, "b": pa.array(b.tolist(), type=pa.list_(pa.float32()))})


def submit(platform: Platform, data: bytes, shard_rows: int, **params: Any) -> str:
    file = platform.services.files.create("beta", "user_data", "rows.parquet", data)
    response = platform.client.post(
        "/api/jobs",
        json={
            "target": {"model": MODEL},
            "input_digest": file.digest,
            "pipeline": [
                {
                    "name": "shards",
                    "implementation": "tensor_shards",
                    "params": {"shard_rows": shard_rows, **params},
                },
                {"name": "publish", "implementation": "tensor_publish"},
            ],
        },
        headers={"Authorization": f"Bearer {platform.key}"},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def queued(platform: Platform, priority: str) -> float:
    value = platform.services.metrics.registry.get_sample_value(
        "modelport_inference_queued_requests_total",
        {"model": MODEL, "version": "1", "priority": priority},
    )
    return value or 0.0


@pytest.fixture
def ranged(tmp_path: Path, database_url: str) -> Iterator[Jobs]:
    """The jobs platform with every blob read by ranges (none is small enough to be
    verified whole), as a large batch file is."""
    platform = make_platform(
        tmp_path / "home", database_url, job_runner_concurrency=0, verify_below_bytes=0
    )
    publish_pair(platform)
    platform.services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    yield Jobs(platform)
    platform.close_client()
    platform.services.close()


def test_a_parquet_batch_scores_every_row_shard_by_shard_at_offline(ranged: Jobs) -> None:
    platform = ranged.platform
    services = platform.services
    a, b = pair_rows(10)
    # Row groups of 4 and shards of 3: shards 1 and 2 each span two row groups.
    job_id = submit(platform, parquet_bytes(pair_table(a, b), row_group_size=4), 3)
    ranged.drain()
    job = services.jobs.get(None, job_id)
    assert job.state is JobState.SUCCEEDED, job
    manifest = services.jobs.output(job)
    assert manifest is not None
    assert manifest["format"] == "parquet" and manifest["outputs"] == ["sum", "total"]
    assert manifest["rows"] == 10 and "output" not in manifest
    assert [s["rows"] for s in manifest["shards"]] == [3, 3, 3, 1]
    parts = [pq.read_table(io.BytesIO(services.blobs.get(s["digest"]))) for s in manifest["shards"]]
    scored = pa.concat_tables(parts)
    assert scored.column_names == ["sum", "total"]
    sums = np.array(scored.column("sum").to_pylist(), dtype=np.float32)
    np.testing.assert_array_equal(sums, a + b)
    np.testing.assert_array_equal(scored.column("total").to_numpy(), a.sum(axis=1))
    # One metered call per shard, each queued at offline priority.
    charged = Counter(
        e.event.prediction_id
        for e in platform.entries()
        if e.event.prediction_id.startswith(f"batch:{job_id}:")
    )
    assert charged == Counter({f"batch:{job_id}:{i}": 1 for i in range(4)})
    assert queued(platform, "offline") == 4
    assert queued(platform, "interactive") == queued(platform, "batch") == 0
    shown = ranged.get(job_id).json()
    assert shown["progress"]["rows_total"] == 10 and shown["progress"]["rows_done"] == 10

    # params.output keeps one output column.
    one = submit(platform, parquet_bytes(pair_table(a, b)), 100, output="total")
    ranged.drain()
    manifest = services.jobs.output(services.jobs.get(None, one))
    assert manifest is not None and manifest["outputs"] == ["total"]
    kept = pq.read_table(io.BytesIO(services.blobs.get(manifest["shards"][0]["digest"])))
    assert kept.column_names == ["total"]
    np.testing.assert_array_equal(kept.column("total").to_numpy(), a.sum(axis=1))


def _ragged() -> pa.Table:
    lists = pa.array([[1.0, 2.0], [3.0]], type=pa.list_(pa.float32()))
    return pa.table({"a": lists, "b": lists})


def _with_nulls() -> pa.Table:
    lists = pa.array([[1.0, 2.0], None], type=pa.list_(pa.float32()))
    return pa.table({"a": lists, "b": lists})


def _table(**columns: Any) -> pa.Table:
    return pa.table(columns)


_A, _B = pair_rows(2)
_ROWS = pa.array(_A.tolist(), type=pa.list_(pa.float32()))
_BAD_FILES: list[tuple[str, Any, dict[str, Any], str]] = [
    ("a column missing", lambda: _table(a=_ROWS), {}, "batch_columns_mismatch"),
    ("an extra column", lambda: _table(a=_ROWS, b=_ROWS, c=_ROWS), {}, "batch_columns_mismatch"),
    (
        "doubles for FP32",
        lambda: _table(a=_ROWS, b=pa.array(_B.tolist(), type=pa.list_(pa.float64()))),
        {},
        "batch_columns_mismatch",
    ),
    (
        "rank 1 for rank 2",
        lambda: _table(a=_ROWS, b=pa.array([1.0, 2.0], type=pa.float32())),
        {},
        "batch_columns_mismatch",
    ),
    (
        "rows of 3 for rows of 2",
        lambda: _table(a=_ROWS, b=pa.array([[1.0] * 3] * 2, type=pa.list_(pa.float32()))),
        {},
        "batch_columns_mismatch",
    ),
    (
        "fixed-size lists of 3 for rows of 2",
        lambda: _table(
            a=_ROWS,
            b=pa.FixedSizeListArray.from_arrays(pa.array([1.0] * 6, type=pa.float32()), 3),
        ),
        {},
        "batch_columns_mismatch",
    ),
    ("ragged lists", _ragged, {}, "batch_columns_mismatch"),
    ("nulls", _with_nulls, {}, "invalid_batch_file"),
    ("no rows", lambda: pair_table(*pair_rows(0)), {}, "invalid_batch_file"),
    ("an input named", lambda: pair_table(_A, _B), {"input": "a"}, "invalid_params"),
    ("an unknown output", lambda: pair_table(_A, _B), {"output": "nope"}, "invalid_params"),
]


def test_parquet_files_that_do_not_fit_the_model_fail_with_a_stable_code(jobs: Jobs) -> None:
    platform = jobs.platform
    publish_pair(platform)
    submitted = {
        what: (submit(platform, parquet_bytes(make()), 10, **params), code)
        for what, make, params, code in _BAD_FILES
    }
    # Parquet's magic at the start, but no footer: not a Parquet file.
    submitted["a cut file"] = (
        submit(platform, parquet_bytes(pair_table(_A, _B))[:-12], 10),
        "invalid_batch_file",
    )
    jobs.drain()
    for what, (job_id, code) in submitted.items():
        job = platform.services.jobs.get(None, job_id)
        assert job.state is JobState.FAILED, what
        assert job.error_code == code, (what, job.error_message, job.error_code)
        assert job.stages[0].attempts == 1, what  # refused at once, never retried
    assert queued(platform, "offline") == 0  # nothing reached the model


def test_without_pyarrow_a_parquet_batch_is_refused_with_parquet_unavailable(
    jobs: Jobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform = jobs.platform
    publish_pair(platform)
    job_id = submit(platform, parquet_bytes(pair_table(_A, _B)), 10)
    for name in ("pyarrow", "pyarrow.parquet", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, name, None)  # ``import pyarrow`` now fails
    jobs.drain()
    job = platform.services.jobs.get(None, job_id)
    assert job.state is JobState.FAILED and job.error_code == "parquet_unavailable"
    assert job.error_message is not None and "modelport[parquet]" in job.error_message
