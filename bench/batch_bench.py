"""Rows per second of a batch job over a ``.npy`` file and over a Parquet file against
the same rows through synchronous ``/v2`` calls, and the job machinery's overhead per job.

    .venv/bin/python bench/batch_bench.py                 # 20000 rows, 50 jobs
    .venv/bin/python bench/batch_bench.py --rows 100000 --shard-rows 5000 --jobs 200

One tiny ONNX model (add-one), published and approved, called with a tenant's key:

- batch: the rows as one ``.npy`` file, one job of the tensor batch pipeline
  (``tensor_shards`` → ``tensor_publish``, ``--shard-rows`` rows a call), from submit
  to its manifest, run by a runner on this process (``drain``);
- Parquet batch: the same, the rows as a Parquet file (a fixed-size list column,
  row groups of ``--shard-rows``), each shard's outputs written as Parquet;
- /v2 per row: the same rows, one ``POST /v2/models/acme/adder/infer`` each, through
  the whole app over ASGI (no sockets), one after the other;
- job overhead: ``--jobs`` jobs of the default pipeline (validate → infer →
  postprocess) on one row each, submit to done, one at a time, against one ``/v2``
  call of the same row (p50 of each, and the difference).

The database is SQLite in a temporary home; metering runs with no price rule.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from asgi_calls import post
from endpoint_overhead_bench import MODEL, ROW, setup

from modelport.api import create_app
from modelport.app import Services
from modelport.jobs.service import Submission
from modelport.jobs.types import JobState, StageSpec
from modelport.tenancy.types import Principal


def principal(services: Services, key: str) -> Principal:
    return services.authenticator.authenticate(key)


def npy_file(array: np.ndarray, shard: int) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def parquet_file(array: np.ndarray, shard: int) -> bytes:
    column = pa.FixedSizeListArray.from_arrays(pa.array(array.reshape(-1)), array.shape[1])
    out = io.BytesIO()
    pq.write_table(pa.table({"x": column}), out, row_group_size=shard)
    return out.getvalue()


def batch_rows_per_second(
    services: Services, who: Principal, rows: int, shard: int, parquet: bool = False
) -> float:
    array = np.tile(np.array(ROW, dtype=np.float32), (rows, 1))
    data = (parquet_file if parquet else npy_file)(array, shard)
    file = services.files.create("acme", "user_data", "rows", data)
    pipeline = (
        StageSpec("shards", "tensor_shards", params={"shard_rows": shard}),
        StageSpec("publish", "tensor_publish"),
    )
    started = time.perf_counter()
    job, _ = services.jobs.submit(
        who,
        Submission("model", MODEL, input_digest=file.digest, pipeline=pipeline),
    )
    asyncio.run(services.job_runner.drain())
    elapsed = time.perf_counter() - started
    done = services.jobs.get(None, job.id)
    assert done.state is JobState.SUCCEEDED, done
    return rows / elapsed


def v2_rows_per_second(services: Services, key: str, rows: int) -> float:
    app = create_app(services)
    auth = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    body = orjson.dumps(
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW}]}
    )
    path = f"/v2/models/{MODEL}/infer"

    async def run() -> float:
        for _ in range(100):  # warm up
            await post(app, path, auth, body)
        started = time.perf_counter()
        for _ in range(rows):
            status = await post(app, path, auth, body)
            assert status == 200, status
        return rows / (time.perf_counter() - started)

    return asyncio.run(run())


def job_overhead(services: Services, key: str, who: Principal, jobs: int) -> tuple[float, float]:
    """p50 of submit-to-done of a one-row job, and of one /v2 call, in milliseconds."""
    inputs = [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW}]
    app = create_app(services)
    auth = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    body = orjson.dumps({"inputs": inputs})
    took, calls = [], []
    for _ in range(jobs):
        started = time.perf_counter()
        job, _ = services.jobs.submit(who, Submission("model", MODEL, inputs=inputs))
        asyncio.run(services.job_runner.drain())
        took.append(time.perf_counter() - started)
        assert services.jobs.get(None, job.id).state is JobState.SUCCEEDED
        started = time.perf_counter()
        asyncio.run(post(app, f"/v2/models/{MODEL}/infer", auth, body))
        calls.append(time.perf_counter() - started)
    return statistics.median(took) * 1000, statistics.median(calls) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--shard-rows", type=int, default=1_000)
    parser.add_argument("--jobs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        services, key = setup(Path(home))
        try:
            who = principal(services, key)
            # Warm up (the model's load, the first shard's writes) outside the figures.
            batch_rows_per_second(services, who, args.shard_rows, args.shard_rows)
            batch = batch_rows_per_second(services, who, args.rows, args.shard_rows)
            parquet = batch_rows_per_second(services, who, args.rows, args.shard_rows, parquet=True)
            v2 = v2_rows_per_second(services, key, args.rows)
            job_ms, call_ms = job_overhead(services, key, who, args.jobs)
        finally:
            services.close()
    print(f"rows: {args.rows}, shard rows: {args.shard_rows}")
    print(f"batch job over the file  {batch:12,.0f} rows/s")
    print(f"same, over Parquet       {parquet:12,.0f} rows/s   (x{parquet / batch:.2f} of .npy)")
    print(f"/v2 call per row         {v2:12,.0f} rows/s   (batch x{batch / v2:.1f})")
    print(f"job submit to done, p50  {job_ms:10.2f} ms  ({args.jobs} one-row jobs)")
    print(f"/v2 call, p50            {call_ms:10.2f} ms")
    print(f"job machinery per job    {job_ms - call_ms:10.2f} ms")


if __name__ == "__main__":
    main()
