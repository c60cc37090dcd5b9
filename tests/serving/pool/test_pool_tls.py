"""TLS on the gateway → worker hop: a worker's gRPC server with a certificate of a
throwaway authority (made here with ``cryptography``), called through the gateway's
``WorkerChannels`` as the pool calls it. The worker answering a call for a version it
does not know (``NotFound``) shows the handshake and the token passed; a connection
refused at the handshake is ``backend_unreachable`` (nothing of the worker's)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from modelport.api.grpc.pool_tls import PoolTls
from modelport.api.grpc.worker import WorkerGrpcServer, WorkerServicer
from modelport.api.grpc.worker_backend import WorkerChannels
from modelport.app import WorkerServices, build_worker_services, pool_tls
from modelport.clock import SystemClock
from modelport.config import Role, Settings
from modelport.errors import InvalidInput, ModelportError, NotFound, Unavailable
from modelport.manifest import parse_manifest
from modelport.serving.pool.types import WorkerInfo
from modelport.serving.types import BackendRequest, VersionRef
from tests.conftest import ADMIN_KEY
from tests.serving.conftest import X, Y
from tests.serving.pool.tls import Authority

TOKEN = "worker-token-" + "t" * 24
MANIFEST = parse_manifest(
    {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": "sha256:" + "0" * 64, "size": 1}],
        "inputs": X,
        "outputs": Y,
        "license": "MIT",
    }
)
UNKNOWN = VersionRef("acme/unknown", "1", "sha256:" + "1" * 64, MANIFEST)


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority.create("pool")


@pytest.fixture
def worker(tmp_path: Path, sqlite_template: Path) -> WorkerServices:
    shutil.copyfile(sqlite_template, tmp_path / "modelport.db")
    services = build_worker_services(
        Settings(
            role=Role.WORKER,
            home=tmp_path,
            database_url=f"sqlite:///{tmp_path / 'modelport.db'}",
            admin_key=ADMIN_KEY,
            auto_migrate=False,
        )
    )
    yield services  # type: ignore[misc]
    services.close()


async def call(worker: WorkerServices, server_tls: PoolTls, gateway_tls: PoolTls | None) -> str:
    """What a gateway with ``gateway_tls`` hears from the worker: the error's code."""
    server = WorkerGrpcServer(
        WorkerServicer(worker, TOKEN), "127.0.0.1", 0, 1 << 20, tls=server_tls
    )
    async with server.running():
        clock = SystemClock()
        channels = WorkerChannels(TOKEN, 1 << 20, clock=clock, tls=gateway_tls)
        backend = channels.backend(WorkerInfo(id="w1", address=f"127.0.0.1:{server.port}"))
        try:
            await backend.infer(
                BackendRequest(version=UNKNOWN, inputs={}, deadline=clock.monotonic() + 10)
            )
        except ModelportError as exc:
            kind = "not_found" if isinstance(exc, NotFound) else type(exc).__name__
            assert isinstance(exc, NotFound | Unavailable), exc
            return f"{kind}:{exc.code}"
        finally:
            await channels.close()
    raise AssertionError("the worker answered a version it does not hold")


def test_mutual_tls_call_is_answered_by_the_worker(
    worker: WorkerServices, authority: Authority
) -> None:
    heard = asyncio.run(call(worker, authority.side("worker"), authority.side("gateway")))
    assert heard.startswith("not_found:")  # the worker's own answer, past TLS and the token


def test_a_plaintext_gateway_is_refused(worker: WorkerServices, authority: Authority) -> None:
    heard = asyncio.run(call(worker, authority.side("worker"), None))
    assert heard == "Unavailable:backend_unreachable"


def test_a_gateway_certificate_of_another_authority_is_refused(
    worker: WorkerServices, authority: Authority
) -> None:
    other = Authority.create("elsewhere")
    # It trusts the worker's authority, but presents a certificate the worker's does not sign.
    heard = asyncio.run(
        call(worker, authority.side("worker"), other.side("gateway", ca=authority.pem))
    )
    assert heard == "Unavailable:backend_unreachable"


def test_a_gateway_without_a_certificate_is_refused_when_the_worker_wants_one(
    worker: WorkerServices, authority: Authority
) -> None:
    heard = asyncio.run(call(worker, authority.side("worker"), PoolTls(ca=authority.pem)))
    assert heard == "Unavailable:backend_unreachable"


def test_tls_without_client_certificates_when_the_worker_has_no_authority(
    worker: WorkerServices, authority: Authority
) -> None:
    server = authority.side("worker")
    one_way = PoolTls(cert=server.cert, key=server.key)
    heard = asyncio.run(call(worker, one_way, PoolTls(ca=authority.pem)))
    assert heard.startswith("not_found:")


def test_workers_certified_under_one_name_are_checked_for_that_name(
    worker: WorkerServices, authority: Authority
) -> None:
    cert, key = authority.issue("worker", dns="modelport-worker")  # no address in it
    server = PoolTls(cert=cert, key=key)
    by_address = asyncio.run(call(worker, server, PoolTls(ca=authority.pem)))
    assert by_address == "Unavailable:backend_unreachable"
    by_name = PoolTls(ca=authority.pem, server_name="modelport-worker")
    assert asyncio.run(call(worker, server, by_name)).startswith("not_found:")


def test_the_settings_name_the_pem_files(tmp_path: Path, authority: Authority) -> None:
    side = authority.side("worker")
    paths = {}
    for name, data in (("cert", side.cert), ("key", side.key), ("ca", side.ca)):
        path = paths[name] = tmp_path / f"{name}.pem"
        assert data is not None
        path.write_bytes(data)
    settings = Settings(
        home=tmp_path,
        worker_tls_cert=str(paths["cert"]),
        worker_tls_key=str(paths["key"]),
        worker_tls_ca=str(paths["ca"]),
    )
    assert pool_tls(settings) == side
    assert pool_tls(Settings(home=tmp_path)) is None
    with pytest.raises(InvalidInput) as unreadable:
        pool_tls(Settings(home=tmp_path, worker_tls_ca=str(tmp_path / "missing.pem")))
    assert unreadable.value.code == "worker_tls_unreadable"
    with pytest.raises(ValueError, match="go together"):
        Settings(home=tmp_path, worker_tls_cert=str(paths["cert"]))
