"""Prometheus multiprocess mode: one ``/metrics`` answer for several worker processes.

With more than one worker, the serve command sets ``PROMETHEUS_MULTIPROC_DIR`` to an
empty folder before it starts them. prometheus_client, imported after that, keeps every
metric value in mmap files there (one set per process) instead of in memory, and a scrape,
which lands on any one worker, renders the files of all of them (``exposed``): counters and
histograms are summed, gauges combine as their ``multiprocess_mode`` says.

Only ``Counter``, ``Histogram`` and ``Gauge`` work in this mode: no ``set_function``,
``Info``, ``Enum`` or custom collectors (the aggregate never sees the process's registry);
the process and platform series are added to the aggregate itself (``process_metrics``).

A worker calls ``prepare_worker()`` as it starts, so that the ``live*`` gauges of a worker
that died (and was restarted with a new pid) stop counting.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, values
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from modelport.observability.process_metrics import install_aggregate

ENV = "PROMETHEUS_MULTIPROC_DIR"
_LIVE_FILE = re.compile(r"^gauge_live[a-z]+_(\d+)\.db$")  # what mark_process_dead removes


def multiprocess_dir() -> str | None:
    """The shared folder when this process's metric values live in files, else ``None``.

    prometheus_client chooses file-backed values when it is imported with ``ENV`` set; both
    are checked so that a process which imported it before the variable was set still
    renders its own registry rather than the other processes' files without its own.
    """
    path = os.environ.get(ENV)
    if not path or not getattr(values.ValueClass, "_multiprocess", False):
        return None
    return path


def exposed(registry: CollectorRegistry) -> CollectorRegistry:
    """What a scrape of this process shows: the aggregate of every process's files in
    multiprocess mode (a fresh registry, built per scrape), else ``registry`` itself."""
    path = multiprocess_dir()
    if path is None:
        return registry
    aggregate = CollectorRegistry()
    MultiProcessCollector(aggregate, path=path)
    install_aggregate(aggregate, path)  # every live worker's process_* series
    return aggregate


def prepare_worker() -> list[int]:
    """Mark dead every process that left ``live*`` gauge files in the folder and is gone;
    return their pids (none outside multiprocess mode).

    Their ``live*`` gauge files are removed, so queue depths, memory and states of a crashed
    worker stop counting; their counters and histograms stay (the sums must not go down).
    This process's own files are left alone, so it is safe to call at any time.
    """
    path = multiprocess_dir()
    if path is None or os.name != "posix":  # the liveness probe is a POSIX signal 0
        return []
    own = os.getpid()
    files = Path(path).glob("gauge_live*.db")
    pids = {int(m.group(1)) for f in files if (m := _LIVE_FILE.match(f.name))}
    dead = sorted(pid for pid in pids if pid != own and not _alive(pid))
    for pid in dead:
        mark_process_dead(pid, path)
    return dead


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True
