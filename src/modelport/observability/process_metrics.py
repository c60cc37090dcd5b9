"""The process and Python platform series on ``/metrics`` (``process_*``, ``python_info``,
``python_gc_*``), in one process and with several worker processes.

One process: prometheus_client's own ``ProcessCollector``, ``PlatformCollector`` and
``GCCollector`` on the registry (``install``).

Several workers (multiprocess mode, see ``multiprocess``): a scrape lands on one worker
and renders the aggregate of every worker's files, which holds no process series (custom
collectors never reach the files). So the aggregate gets ``WorkerProcesses``: the
``process_*`` series of every live worker, read from ``/proc/<pid>`` as prometheus_client
reads its own, each with a ``pid`` label (sum them for the whole server); and
``python_info``, the same in every worker. The garbage collector's counts are per
interpreter and not shown there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from modelport.observability import gpu_metrics

_PID_FILE = re.compile(r"^[a-z_]+_(\d+)\.db$")


def install(registry: CollectorRegistry) -> None:
    """Register this process's process, platform and GC collectors on ``registry``, and
    the machine's GPUs where there are any (``gpu_metrics``)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    gpu_metrics.install(registry)


def worker_pids(path: str) -> list[int]:
    """The live processes that keep metric files in the multiprocess folder ``path``."""
    pids = {int(m.group(1)) for f in Path(path).iterdir() if (m := _PID_FILE.match(f.name))}
    return sorted(pid for pid in pids if _alive(pid))


class WorkerProcesses(Collector):
    """The ``process_*`` series of every live worker sharing ``path``, labelled ``pid``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, Metric] = {}
        for pid in worker_pids(self.path):
            reader = ProcessCollector(pid=lambda pid=pid: pid, registry=None)  # type: ignore[misc]
            for metric in reader.collect():
                into = merged.get(metric.name)
                if into is None:
                    into = merged[metric.name] = Metric(
                        metric.name, metric.documentation, metric.type, metric.unit
                    )
                into.samples.extend(
                    Sample(s.name, {**s.labels, "pid": str(pid)}, s.value, s.timestamp)
                    for s in metric.samples
                )
        return list(merged.values())


def install_aggregate(registry: CollectorRegistry, path: str) -> None:
    """Register the multiprocess scrape's process and platform series on ``registry``."""
    registry.register(WorkerProcesses(path))
    PlatformCollector(registry=registry)
    gpu_metrics.install(registry)  # the machine's GPUs, once (not per worker)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
