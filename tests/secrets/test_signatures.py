"""A version's signatures are checked when it is deployed and when it is loaded: an
unsigned, badly signed or altered version is refused, and with trusted publisher keys
configured, so is one no trusted key signed."""

from __future__ import annotations

import base64
from pathlib import Path

import anyio
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import text

from modelport.app import signature_check
from modelport.errors import InvalidInput, Unprocessable
from modelport.registry.signing import key_id
from modelport.registry.trust import parse_trusted_keys
from modelport.runtime.cache import ModelCache
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.types import VersionKey
from modelport.testing.toy_engine import ToyGenerativeFormat
from tests.serving.conftest import Serving, ServingFactory

REF = "acme/adder:1"
LOAD = "/v2/repository/models/acme/adder/load"


def raw(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def deploy(serving: Serving) -> tuple[int, str]:
    if serving.client.get("/api/endpoints/fraud").status_code == 404:
        serving.endpoint("fraud")
    response = serving.client.post(
        "/api/endpoints/fraud/deployments",
        json={"versions": [{"model": "acme/adder", "version": "1", "weight": 100}]},
    )
    return response.status_code, response.json().get("code", "")


def load(serving: Serving) -> tuple[int, str]:
    response = serving.client.post(LOAD, json={"parameters": {"version": "1"}})
    return response.status_code, response.json().get("code", "")


def infer(serving: Serving) -> tuple[int, str]:
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    response = serving.client.post("/v2/models/acme/adder/versions/1/infer", json=body)
    return response.status_code, response.json().get("code", "")


def sql(serving: Serving, statement: str) -> None:
    with serving.services.database.transaction() as session:
        session.execute(text(statement))


@pytest.fixture
def plane(make_serving: ServingFactory, database_url: str) -> Serving:
    serving = make_serving(database_url)
    serving.publish("acme/adder", "1")
    return serving


def test_a_signed_version_deploys_and_loads(plane: Serving) -> None:
    assert deploy(plane)[0] == 202
    assert load(plane)[0] == 200


def test_an_unsigned_version_is_refused_at_deploy_and_at_load(plane: Serving) -> None:
    sql(plane, "DELETE FROM signatures")
    assert deploy(plane) == (422, "signature_missing")
    assert load(plane) == (422, "signature_missing")


def test_a_badly_signed_version_is_refused_at_deploy_and_at_load(plane: Serving) -> None:
    forged = Ed25519PrivateKey.generate().sign(b"something else")
    with plane.services.database.transaction() as session:
        session.execute(text("UPDATE signatures SET signature = :s"), {"s": forged})
    # A call that loads the version on demand is refused as well.
    assert infer(plane) == (422, "signature_invalid")
    assert deploy(plane) == (422, "signature_invalid")
    assert load(plane) == (422, "signature_invalid")


def test_an_altered_manifest_is_refused(plane: Serving) -> None:
    sql(plane, "UPDATE model_versions SET manifest = replace(manifest, 'MIT', 'GPL')")
    assert deploy(plane) == (422, "signature_invalid")


def test_loading_a_manifest_other_than_the_signed_one_is_refused(plane: Serving) -> None:
    found = plane.services.registry.get_version("acme", "adder", "1")
    other = found.manifest.model_copy(update={"license": "Apache-2.0"})
    host = plane.services.host
    assert host is not None
    with pytest.raises(Unprocessable) as refused:
        host.load(
            VersionKey("acme/adder", "1", found.manifest_digest), other, plane.services.blob_store
        )
    assert refused.value.code == "signature_invalid"


def test_a_generative_engine_checks_before_it_loads(plane: Serving, tmp_path: Path) -> None:
    found = plane.services.registry.get_version("acme", "adder", "1")
    toy = ToyGenerativeFormat()
    engines = GenerativeHost(
        cache=ModelCache(tmp_path / "cache"),
        formats={"onnx": toy},
        check_load=signature_check(plane.services.registry),
    )
    key = VersionKey("acme/adder", "1", found.manifest_digest)
    blobs = plane.services.blob_store
    assert anyio.run(engines.ensure_loaded, key, found.manifest, blobs) is toy.engine
    engines.unload(key)
    sql(plane, "DELETE FROM signatures")
    with pytest.raises(Unprocessable) as refused:
        anyio.run(engines.ensure_loaded, key, found.manifest, blobs)
    assert refused.value.code == "signature_missing" and toy.loads == 1


def test_trusted_publisher_keys(make_serving: ServingFactory, database_url: str) -> None:
    publisher = Ed25519PrivateKey.generate()
    serving = make_serving(database_url, trusted_publisher_keys=key_id(raw(publisher)))
    serving.publish("acme/adder", "1")
    # Only the platform's signature: not a trusted publisher's.
    assert deploy(serving) == (422, "signature_untrusted")
    assert load(serving) == (422, "signature_untrusted")
    # Signed by an untrusted key: still refused.
    found = serving.services.registry.get_version("acme", "adder", "1")
    stranger = Ed25519PrivateKey.generate()
    serving.services.registry.add_signature(
        "acme",
        "adder",
        "1",
        public_key=raw(stranger),
        signature=stranger.sign(found.manifest_digest.encode()),
        signer="stranger",
    )
    assert deploy(serving) == (422, "signature_untrusted")
    serving.services.registry.add_signature(
        "acme",
        "adder",
        "1",
        public_key=raw(publisher),
        signature=publisher.sign(found.manifest_digest.encode()),
        signer="acme-release",
    )
    assert load(serving)[0] == 200
    assert deploy(serving)[0] == 202


def test_trusted_keys_are_read_from_ids_raw_keys_and_files(tmp_path: Path) -> None:
    keys = [raw(Ed25519PrivateKey.generate()) for _ in range(5)]
    ids = [key_id(k) for k in keys]
    pem = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    pem_id = key_id(
        serialization.load_pem_public_key(pem).public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
    )
    listed = tmp_path / "trusted.txt"
    listed.write_text(f"# release keys\n{ids[3]}\n{keys[4].hex()}  # ci\n{pem.decode()}")
    value = f"{ids[0]}, {base64.b64encode(keys[1]).decode()},{keys[2].hex()},{listed}"
    assert parse_trusted_keys(value) == {*ids, pem_id}
    assert parse_trusted_keys("") == frozenset()
    for bad in ("sha256:abc", "not a key", base64.b64encode(b"short").decode()):
        with pytest.raises(InvalidInput) as refused:
            parse_trusted_keys(bad)
        assert refused.value.code == "invalid_trusted_key"
