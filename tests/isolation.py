"""What keeps one pytest-xdist worker out of another's way: its index, its Redis database,
its free ports. (Its PostgreSQL database and its installation id are made in
``tests/conftest.py``; its folders are pytest's, a base temp per worker.)"""

from __future__ import annotations

import os
import random
import socket
from collections import deque
from urllib.parse import urlsplit, urlunsplit

REDIS_ENV = "MODELPORT_TEST_REDIS_URL"
PORTS_FIRST = 20_000
"""Below the kernel's ephemeral range (32768 and up), so a port picked here is not taken
meanwhile by an outgoing connection; each worker has a block of its own."""
PORTS_PER_WORKER = 1_000
REDIS_DATABASES = 16


def worker_id() -> str:
    """``gw0``, ``gw1``... under pytest-xdist; ``master`` in a run without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER", "master")


def worker_index() -> int:
    name = worker_id()
    return int(name[2:]) if name.startswith("gw") else 0


def isolate_redis() -> None:
    """Point this worker's ``MODELPORT_TEST_REDIS_URL`` at a Redis database of its own
    (the URL's number plus one plus the worker's index, modulo 16): keys, streams and
    leases of one worker are invisible to another. Channels are not per database; their
    names carry the installation id, which each worker's database has of its own."""
    url = os.environ.get(REDIS_ENV)
    if not url or worker_id() == "master":
        return
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    if worker_index() + 1 >= REDIS_DATABASES:
        raise RuntimeError(f"at most {REDIS_DATABASES - 1} workers have a Redis database each")
    database = (base + 1 + worker_index()) % REDIS_DATABASES
    os.environ[REDIS_ENV] = urlunsplit(parts._replace(path=f"/{database}"))


_handed_out: deque[int] = deque(maxlen=PORTS_PER_WORKER // 2)
"""The ports this process handed out last. Callers often pick two ports before binding either
(a gRPC port, then the HTTP server's own); without this the second pick can return the
first, and whichever binds second fails with "address already in use"."""


def free_port() -> int:
    """A loopback port free now and not among the last ones this process handed out, from this
    worker's own block: two workers never pick the same one, whatever they start at the
    same moment, and two picks of one worker differ even before either is bound."""
    first = PORTS_FIRST + worker_index() * PORTS_PER_WORKER
    recent = set(_handed_out)
    for port in random.sample(range(first, first + PORTS_PER_WORKER), PORTS_PER_WORKER):
        if port in recent:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            _handed_out.append(port)
            return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_WORKER - 1}")
