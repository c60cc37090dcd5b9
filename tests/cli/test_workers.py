"""The worker supervisor of ``modelport serve --workers``: its own socket per worker,
a dead worker started again, every worker stopped on the way out."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from modelport.cli.workers import Supervisor, listening_socket, reuse_port_supported
from tests.conftest import free_port

pytestmark = [
    pytest.mark.skipif(not reuse_port_supported(), reason="needs SO_REUSEPORT"),
    pytest.mark.slow,  # starts real worker processes
]


def short_lived(options: dict[str, Any]) -> None:
    """A worker that records its pid and dies at once."""
    Path(options["folder"], f"{os.getpid()}.started").touch()


def long_lived(options: dict[str, Any]) -> None:
    """A worker that records its pid and waits to be stopped."""
    Path(options["folder"], f"{os.getpid()}.started").touch()
    time.sleep(600)


def supervise(supervisor: Supervisor, folder: Path, starts: int) -> None:
    """Run ``supervisor`` here (signals are handled in the main thread) until its
    workers have started ``starts`` times, then stop it."""

    def stop_when_started() -> None:
        deadline = time.monotonic() + 60
        while len(list(folder.glob("*.started"))) < starts and time.monotonic() < deadline:
            time.sleep(0.05)
        supervisor.stop()

    threading.Thread(target=stop_when_started, daemon=True).start()
    started = time.monotonic()
    supervisor.run()
    assert time.monotonic() - started < 120, "the supervisor did not stop"


def test_a_worker_that_dies_is_started_again(tmp_path: Path) -> None:
    supervise(Supervisor(1, {"folder": str(tmp_path)}, target=short_lived), tmp_path, 2)
    assert len(list(tmp_path.glob("*.started"))) >= 2


def test_stopping_stops_every_worker(tmp_path: Path) -> None:
    supervise(Supervisor(2, {"folder": str(tmp_path)}, target=long_lived), tmp_path, 2)
    pids = [int(p.stem) for p in tmp_path.glob("*.started")]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_workers_listen_on_one_port_each_with_its_own_socket() -> None:
    port = free_port()
    first = listening_socket("127.0.0.1", port)
    second = listening_socket("127.0.0.1", port)
    try:
        accepted = [0, 0]
        for sock in (first, second):
            sock.settimeout(0.05)
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
        for index, sock in enumerate((first, second)):
            while True:
                try:
                    sock.accept()[0].close()
                except TimeoutError:
                    break
                accepted[index] += 1
        assert sum(accepted) == 40
        assert min(accepted) > 0  # the kernel spreads connections over both sockets
        for client in clients:
            client.close()
    finally:
        first.close()
        second.close()
