"""A host process for the orphan test: loads a looping model in process execution,
starts a call that never ends, prints its worker's pid, and waits to be killed."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from modelport.clock import SystemClock
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.host import ModelHost
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.process.executor import ProcessExecutor, ProcessExecutors
from modelport.runtime.types import VersionKey
from modelport.testing.onnx_models import looping_add_one
from tests.runtime.conftest import DictBlobSource, onnx_manifest


async def main() -> None:
    source = DictBlobSource()
    manifest, digest = onnx_manifest(
        source,
        looping_add_one(),
        inputs=[
            {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "steps", "datatype": "INT64", "shape": [-1]},
        ],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        runtime={"execution": "process"},
    )
    formats = FormatRegistry({"onnx": {"intra_op_threads": 1}})
    ledger = CrashLedger(limit=3, window=60.0, clock=SystemClock())
    host = ModelHost(
        cache=ModelCache(Path(tempfile.mkdtemp()) / "cache"),
        formats=formats,
        budget=MemoryBudget(host_bytes=None),
        process_executors=ProcessExecutors(formats.spec, ledger=ledger, start_timeout=60.0),
    )
    key = VersionKey("acme/loop", "1", digest)
    await asyncio.to_thread(host.load, key, manifest, source)
    executor = host._hosted[key].executor
    assert isinstance(executor, ProcessExecutor)
    call = host.infer(
        key,
        {"x": np.ones((1, 4), np.float32), "steps": np.array([10**15], np.int64)},
        deadline=time.monotonic() + 3600,
    )
    task = asyncio.ensure_future(call)
    await asyncio.sleep(0.5)  # the worker is now looping
    print(executor.pids[0], flush=True)
    await task


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
