"""Code in the sandbox tries to get out: read the server's secrets, reach its port, write
where it should not, start a process, take more memory or CPU than it is given. Each is
refused, and the run says how it was confined.

The probes run exactly as validation runs its worker (``Sandbox.run`` with the version's
files read-only and a private scratch folder)."""

from __future__ import annotations

import errno
import signal
import socket
import threading
from pathlib import Path

import pytest

from modelport.sandbox import Isolation, Limits, Sandbox, SandboxMode
from tests.sandbox.conftest import Runner, make_runner

pytestmark = pytest.mark.slow  # each probe is a process

SECRETS = {
    "MODELPORT_ADMIN_KEY": "admin-" + "s" * 30,
    "MODELPORT_DATABASE_URL": "postgresql://postgres:hunter2@db/modelport",
    "AWS_SECRET_ACCESS_KEY": "aws-" + "k" * 30,
}


def test_the_servers_environment_does_not_reach_the_child(
    run_inside: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    probe = run_inside(
        """
        import json, os
        print(json.dumps({"environ": dict(os.environ)}))
        """
    )
    environ = probe.answer["environ"]
    assert not set(SECRETS) & set(environ)
    assert not any(value in probe.output for value in SECRETS.values())
    assert probe.finished.confinement.isolation is Isolation.BUBBLEWRAP


def test_the_servers_home_and_files_are_not_visible(run_inside: Runner, home: Path) -> None:
    probe = run_inside(
        f"""
        import json
        seen = {{}}
        for path in [{str(home / "modelport.db")!r}, {str(home / "keys" / "signing.pem")!r},
                     "/etc/shadow", "/root/.ssh/id_ed25519", "/proc/1/environ"]:
            try:
                with open(path, "rb") as f:
                    seen[path] = f.read(64).decode(errors="replace")
            except OSError as exc:
                seen[path] = exc.errno
        print(json.dumps(seen))
        """
    )
    seen = probe.answer
    assert seen[str(home / "modelport.db")] == errno.ENOENT
    assert seen[str(home / "keys" / "signing.pem")] == errno.ENOENT
    assert seen["/etc/shadow"] == errno.ENOENT
    # /proc is the sandbox's own: its PID 1 is bubblewrap's, with an empty environment.
    assert "hunter2" not in str(seen["/proc/1/environ"])


def _listener() -> tuple[socket.socket, list[bool]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    accepted: list[bool] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
            accepted.append(True)
            conn.close()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    return server, accepted


CONNECT = """
import json, socket
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print(json.dumps({{"connected": True}}))
except OSError as exc:
    print(json.dumps({{"connected": False, "errno": exc.errno}}))
"""


def test_the_servers_port_cannot_be_reached(run_inside: Runner) -> None:
    server, accepted = _listener()
    with server:
        probe = run_inside(CONNECT.format(port=server.getsockname()[1]))
    # The system-call filter refuses the socket itself.
    assert probe.answer == {"connected": False, "errno": errno.EPERM}
    assert not accepted


def test_without_the_filter_the_network_namespace_still_has_no_route_out(
    bubblewrap: None, home: Path, tmp_path: Path
) -> None:
    run = make_runner(Sandbox(SandboxMode.AUTO, protect=[home], seccomp=False), tmp_path)
    server, accepted = _listener()
    with server:
        probe = run(CONNECT.format(port=server.getsockname()[1]))
    assert probe.finished.confinement.seccomp is False
    # Its own loopback, where nothing listens.
    assert probe.answer == {"connected": False, "errno": errno.ECONNREFUSED}
    assert not accepted


def test_writes_go_only_to_the_scratch_folder(run_inside: Runner, tmp_path: Path) -> None:
    outside = tmp_path / "planted.txt"
    probe = run_inside(
        f"""
        import json
        result = {{}}
        for path in ["files/model.onnx", "/usr/planted", {str(outside)!r}, "scratch.txt"]:
            try:
                with open(path, "w") as f:
                    f.write("x")
                result[path] = "written"
            except OSError as exc:
                result[path] = exc.errno
        print(json.dumps(result))
        """
    )
    result = probe.answer
    assert result["files/model.onnx"] == errno.EROFS  # the version's files are read-only
    assert result["/usr/planted"] == errno.EROFS
    assert result[str(outside)] == errno.ENOENT  # the parent's folders do not exist there
    assert result["scratch.txt"] == "written"
    assert not outside.exists()
    assert (tmp_path / "scratch" / "files" / "model.onnx").read_bytes() == b"weights"
    assert (tmp_path / "scratch" / "scratch.txt").read_text() == "x"


def test_no_process_can_be_started(run_inside: Runner) -> None:
    probe = run_inside(
        """
        import json, os, subprocess, threading
        result = {}
        try:
            os.fork()
            result["fork"] = "forked"
        except OSError as exc:
            result["fork"] = exc.errno
        try:
            subprocess.run(["/usr/bin/true"])
            result["exec"] = "ran"
        except OSError as exc:
            result["exec"] = exc.errno
        worker = threading.Thread(target=lambda: result.setdefault("thread", "ran"))
        worker.start()
        worker.join()
        print(json.dumps(result))
        """
    )
    # Threads stay allowed: model runtimes use them.
    assert probe.answer == {"fork": errno.EPERM, "exec": errno.EPERM, "thread": "ran"}


def test_memory_past_the_limit_is_refused(run_inside: Runner) -> None:
    probe = run_inside(
        """
        import json
        try:
            block = bytearray(2 << 30)
            print(json.dumps({"allocated": len(block)}))
        except MemoryError:
            print(json.dumps({"allocated": 0}))
        """,
        limits=Limits(wall_seconds=60, cpu_seconds=30, memory_bytes=512 << 20),
    )
    assert probe.answer == {"allocated": 0}


def test_cpu_past_the_limit_stops_the_child(run_inside: Runner) -> None:
    probe = run_inside(
        "while True:\n    pass\n",
        limits=Limits(wall_seconds=60, cpu_seconds=1, memory_bytes=1 << 30),
    )
    assert not probe.finished.timed_out
    assert probe.finished.returncode == -signal.SIGXCPU


def test_the_wall_clock_limit_kills_the_whole_group(run_inside: Runner) -> None:
    probe = run_inside(
        "import time\ntime.sleep(600)\n",
        limits=Limits(wall_seconds=1, cpu_seconds=30, memory_bytes=1 << 30),
    )
    assert probe.finished.timed_out
    assert probe.finished.returncode == -signal.SIGKILL
