"""A publisher's model files run in a model host that holds nothing of the server's.

A hostile format plugin (``snooping_format``) loads in the worker process and looks for
the server's credentials: the server's environment through ``/proc``, its own
environment, the server's home (database, keys), the network. It finds none of them,
without namespaces (a clean exec under the system-call filter, ``unisolated``) and
under bubblewrap; the version's own files are all it reads."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelport.clock import ManualClock
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.formats.registry import GROUP
from modelport.runtime.host import ModelHost
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.process.executor import ProcessExecutor, ProcessExecutors
from modelport.runtime.process.launching import THREAD_VARIABLES, SandboxLauncher
from modelport.runtime.types import VersionKey
from modelport.sandbox import Sandbox, SandboxMode, SandboxUnavailable, isolation_available
from modelport.testing.onnx_models import add_one
from tests.conftest import skip_or_fail
from tests.runtime.conftest import DictBlobSource, onnx_manifest
from tests.sandbox.conftest import home

__all__ = ["home"]  # the server's home, with a database and a key to find

pytestmark = pytest.mark.slow  # model hosts are processes

SNOOPING = EntryPoint("snooping", "tests.security.snooping_format:SnoopingFormat", GROUP)
SECRETS = {
    "MODELPORT_ADMIN_KEY": "mp_admin_do-not-leak-0123456789",
    "MODELPORT_DATABASE_URL": "postgresql+psycopg://ops:db-password-leak@db/modelport",
    "MODELPORT_BLOB_SECRET_ACCESS_KEY": "blob-secret-do-not-leak",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-do-not-leak",
}
ALLOWED = {
    "PATH",
    "LANG",
    "HOME",
    "TMPDIR",
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONNOUSERSITE",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "PWD",  # bubblewrap's --chdir sets it (the scratch folder)
    *THREAD_VARIABLES,
}


@pytest.fixture
def source() -> DictBlobSource:
    return DictBlobSource()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on loopback that accepts connections (a service of the server's)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def snooping_host(home: Path, port: int, sandbox: Sandbox) -> ModelHost:
    options = {"intra_op_threads": 1, "server_pid": os.getpid(), "home": str(home), "port": port}
    formats = FormatRegistry({"snooping": options}, plugins={"snooping": SNOOPING})
    ledger = CrashLedger(limit=3, window=60.0, clock=ManualClock())
    launcher = SandboxLauncher(sandbox, scratch_root=home / "model-hosts")
    return ModelHost(
        cache=ModelCache(home / "cache"),  # the version's files live in the home
        formats=formats,
        budget=MemoryBudget(host_bytes=None),
        process_executors=ProcessExecutors(
            formats.spec, ledger=ledger, start_timeout=60.0, launcher=launcher
        ),
    )


def load_snooper(host: ModelHost, source: DictBlobSource) -> VersionKey:
    manifest, digest = onnx_manifest(
        source,
        add_one(),
        inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        outputs=[
            {"name": "y", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "report", "datatype": "UINT8", "shape": [-1, -1]},
        ],
        runtime={"execution": "process"},
    )
    raw = manifest.model_dump(mode="json")
    raw["format"] = "snooping"
    key = VersionKey("mallory/snoop", "1", digest)
    host.load(key, type(manifest).model_validate(raw), source)
    return key


def report(host: ModelHost, key: VersionKey) -> dict[str, Any]:
    async def call() -> Any:
        x = np.zeros((1, 4), np.float32)
        return await host.infer(key, {"x": x}, deadline=time.monotonic() + 30)

    result = asyncio.run(call())
    np.testing.assert_array_equal(result.outputs["y"], np.ones((1, 4), np.float32))
    return dict(json.loads(bytes(result.outputs["report"][0])))


def worker_environ(host: ModelHost, key: VersionKey) -> dict[str, str]:
    """The worker's environment as the server sees it (the worker is its child)."""
    executor = host._hosted[key].executor
    assert isinstance(executor, ProcessExecutor)
    (pid,) = executor.pids
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.split("=", 1) for entry in raw.decode().split("\0") if entry)


def assert_no_credential(environment: dict[str, str]) -> None:
    assert set(environment) <= ALLOWED, set(environment) - ALLOWED
    assert not [k for k in environment if k.startswith("MODELPORT_")]
    for value in environment.values():
        for secret in SECRETS.values():
            assert secret not in value


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's credentials, in its environment while the model host starts."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


@pytest.mark.usefixtures("secrets")
def test_an_unisolated_model_host_has_no_credential_and_no_network(
    home: Path, listener: int, source: DictBlobSource
) -> None:
    host = snooping_host(home, listener, Sandbox(SandboxMode.UNISOLATED, protect=[home]))
    try:
        key = load_snooper(host, source)
        seen = report(host, key)
        assert_no_credential(seen["environment"])
        assert_no_credential(worker_environ(host, key))
        # The server is not dumpable: its environment is closed to its own children.
        assert seen["server_environ"] == "PermissionError"
        assert seen["network"] == "PermissionError"  # the filter refuses a TCP socket
        assert seen["cwd"] != os.getcwd()
        assert Path(seen["cwd"]).parent == home / "model-hosts" / f"server-{os.getpid()}"  # private
        assert seen["stdin"] == "read:"  # closed: nothing to read
        assert seen["model_file"] == "ok:"
    finally:
        host.close()
    scratch = home / "model-hosts" / f"server-{os.getpid()}"
    assert list(scratch.iterdir()) == []  # scratch removed with the worker


@pytest.mark.usefixtures("secrets")
def test_a_model_host_under_bubblewrap_sees_only_the_versions_files(
    home: Path, listener: int, source: DictBlobSource
) -> None:
    if not isolation_available():
        skip_or_fail("model hosts under bubblewrap need bubblewrap (apt install bubblewrap)")
    host = snooping_host(home, listener, Sandbox(SandboxMode.BUBBLEWRAP, protect=[home]))
    try:
        key = load_snooper(host, source)
        seen = report(host, key)
        assert_no_credential(seen["environment"])
        assert_no_credential(worker_environ(host, key))
        # Its own PID namespace: the server's process is not there at all.
        assert seen["server_environ"] == "FileNotFoundError"
        assert seen["network"] != "connected"
        assert seen["database"] == "FileNotFoundError"
        assert seen["home_listing"] == "ok:cache"  # the version's files, nothing beside
        assert seen["cwd"] == "/sandbox"
        assert seen["model_file"] == "ok:"
        # Tensors still cross shared memory, batch after batch, larger than a segment.
        big = np.zeros((50_000, 4), np.float32)

        async def call() -> Any:
            return await host.infer(key, {"x": big}, deadline=time.monotonic() + 30)

        np.testing.assert_array_equal(asyncio.run(call()).outputs["y"], big + 1)
    finally:
        host.close()


def test_a_host_asked_for_isolation_it_cannot_have_fails_the_load_closed(
    home: Path, listener: int, source: DictBlobSource
) -> None:
    host = snooping_host(
        home, listener, Sandbox(SandboxMode.BUBBLEWRAP, bwrap="no-such-bwrap", protect=[home])
    )
    try:
        with pytest.raises(SandboxUnavailable) as raised:
            load_snooper(host, source)
        assert raised.value.code == "sandbox_unavailable"
        assert "MODELPORT_SANDBOX=unisolated" in raised.value.message
        assert not (home / "model-hosts").exists() or not list((home / "model-hosts").iterdir())
    finally:
        host.close()
