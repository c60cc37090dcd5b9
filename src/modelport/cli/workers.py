"""Worker processes for ``modelport serve --workers N``, each with its own listening socket.

uvicorn's own ``--workers`` shares one socket: every worker waits on it, and the first
to wake accepts all the connections waiting, so under a burst of new connections one
worker can take most of them (seen here: 47 of 64). Keep-alive clients then stay with
it, and the other worker idles. Here each worker binds its own socket with
``SO_REUSEPORT``, and the kernel spreads new connections over them by their addresses.

The supervisor starts the workers (``spawn``: each a fresh interpreter that builds its
application from the environment, ``modelport.app:serve_app``), starts again one that
dies, and on SIGTERM or SIGINT stops them all: uvicorn in each finishes its requests and
runs its shutdown.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

_log = logging.getLogger(__name__)

APP = "modelport.app:serve_app"
_STOP_SECONDS = 30.0
"""How long a stopping worker may take to finish before it is killed."""
_RESTART_PAUSE = 1.0
"""Least time between two starts of the same worker slot (a worker that dies at once
must not spin the supervisor)."""


def reuse_port_supported() -> bool:
    return hasattr(socket, "SO_REUSEPORT")


def listening_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A socket bound to ``host:port`` with ``SO_REUSEPORT``, listening."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def worker_main(options: dict[str, Any]) -> None:
    """One worker: its own socket, the application from the environment, uvicorn."""
    import uvicorn

    sock = listening_socket(options["host"], options["port"])
    config = uvicorn.Config(APP, factory=True, **options)
    uvicorn.Server(config).run(sockets=[sock])


class Supervisor:
    """Runs ``count`` worker processes until told to stop (see the module docstring)."""

    def __init__(
        self,
        count: int,
        options: dict[str, Any],
        *,
        target: Callable[[dict[str, Any]], None] = worker_main,
    ) -> None:
        self.count = count
        self.options = options
        self.target = target
        self._context = multiprocessing.get_context("spawn")
        self._stop = threading.Event()
        self._workers: list[BaseProcess | None] = [None] * count
        self._started_at = [0.0] * count

    def run(self) -> None:
        """Start the workers and watch them until SIGTERM or SIGINT (or ``stop``)."""
        previous = {
            sig: signal.signal(sig, lambda *_: self._stop.set())
            for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            while not self._stop.is_set():
                for slot in range(self.count):
                    self._keep(slot)
                self._stop.wait(0.5)
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        self._stop.set()

    def _keep(self, slot: int) -> None:
        worker = self._workers[slot]
        if worker is not None and worker.is_alive():
            return
        if time.monotonic() - self._started_at[slot] < _RESTART_PAUSE:
            return  # logged when it is started again
        if worker is not None:
            _log.warning("worker %s exited with %s; starting it again", worker.pid, worker.exitcode)
        process = self._context.Process(
            target=self.target, args=(self.options,), name=f"modelport-worker-{slot}"
        )
        process.start()
        self._workers[slot] = process
        self._started_at[slot] = time.monotonic()

    def _stop_all(self) -> None:
        running = [w for w in self._workers if w is not None and w.is_alive()]
        for worker in running:
            worker.terminate()  # SIGTERM: uvicorn shuts down gracefully
        deadline = time.monotonic() + _STOP_SECONDS
        for worker in running:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                worker.kill()
                worker.join()
