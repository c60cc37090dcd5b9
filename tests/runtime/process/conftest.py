"""Hosts whose versions execute in worker processes (real ONNX models, real processes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from modelport.clock import ManualClock
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.formats.registry import GROUP, ONNX_ENTRY
from modelport.runtime.host import ModelHost
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.process.executor import ProcessExecutors
from modelport.runtime.types import BatchingConfig

MISBEHAVING = EntryPoint("misbehaving", "tests.runtime.process.plugins:MisbehavingFormat", GROUP)
LYING = EntryPoint("lying", "tests.runtime.process.plugins:LyingFormat", GROUP)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def formats() -> FormatRegistry:
    options: dict[str, dict[str, object]] = {
        "onnx": {"intra_op_threads": 1},
        "misbehaving": {"intra_op_threads": 1},
        "lying": {"intra_op_threads": 1},
    }
    plugins = {"onnx": ONNX_ENTRY, "misbehaving": MISBEHAVING, "lying": LYING}
    return FormatRegistry(options, plugins=plugins)


ProcessHostFactory = Callable[..., ModelHost]


@pytest.fixture
def make_process_host(
    tmp_path: Path, formats: FormatRegistry, clock: ManualClock
) -> Iterator[ProcessHostFactory]:
    hosts: list[ModelHost] = []

    def factory(*, crash_limit: int = 3, window: float = 60.0, **options: Any) -> ModelHost:
        ledger = CrashLedger(limit=crash_limit, window=window, clock=clock)
        options.setdefault(
            "process_executors", ProcessExecutors(formats.spec, ledger=ledger, start_timeout=60.0)
        )
        options.setdefault("batching", BatchingConfig(max_batch_size=32))
        host = ModelHost(
            cache=ModelCache(tmp_path / "cache"),
            formats=formats,
            budget=MemoryBudget(host_bytes=None),
            **options,
        )
        hosts.append(host)
        return host

    yield factory
    for host in hosts:
        host.close()
