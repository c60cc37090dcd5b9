"""Platform signatures at publish, verification on read, external signatures, the key file."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import update

from modelport.registry.signing import Signer, key_id
from modelport.store.tables import ModelVersionRow, SignatureRow
from tests.registry.helpers import Registry, manifest_for

REF = "acme/adder"


@pytest.fixture
def published(registry: Registry) -> Registry:
    registry.create_model(REF)
    registry.publish(REF, "1")
    return registry


def _signatures(r: Registry) -> list[dict]:
    return r.client.get(f"/api/models/{REF}/versions/1").json()["signatures"]


def test_publish_signs_with_the_platform_key(published: Registry) -> None:
    (sig,) = _signatures(published)
    signer = published.services.registry.signer
    assert sig["verified"] is True
    assert sig["signer"] == "modelport"
    assert base64.b64decode(sig["public_key"]) == signer.public_key
    assert sig["key_id"] == key_id(signer.public_key)
    assert sig["key_id"].startswith("sha256:")


def test_tampered_signature_is_reported_unverified(published: Registry) -> None:
    with published.services.database.transaction() as session:
        row = session.query(SignatureRow).one()
        broken = bytes([row.signature[0] ^ 1]) + row.signature[1:]
        session.execute(update(SignatureRow).values(signature=broken))
    assert [s["verified"] for s in _signatures(published)] == [False]


def test_tampered_digest_is_reported_unverified(published: Registry) -> None:
    with published.services.database.transaction() as session:
        session.execute(update(ModelVersionRow).values(manifest_digest="sha256:" + "0" * 64))
    assert [s["verified"] for s in _signatures(published)] == [False]


def test_tampered_manifest_is_reported_unverified(published: Registry) -> None:
    with published.services.database.transaction() as session:
        text = session.query(ModelVersionRow.manifest).scalar()
        session.execute(update(ModelVersionRow).values(manifest=text.replace('"MIT"', '"0BSD"')))
    assert [s["verified"] for s in _signatures(published)] == [False]


def _external(digest: str, key: Ed25519PrivateKey | None = None) -> dict[str, str]:
    key = key or Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return {
        "public_key": base64.b64encode(public).decode(),
        "signature": base64.b64encode(key.sign(digest.encode())).decode(),
        "signer": "acme-release-bot",
    }


def test_external_signature_is_verified_and_kept(published: Registry) -> None:
    digest = published.client.get(f"/api/models/{REF}/versions/1").json()["manifest_digest"]
    body = _external(digest)
    response = published.client.post(f"/api/models/{REF}/versions/1/signatures", json=body)
    assert response.status_code == 201
    assert response.json()["verified"] is True
    signers = [(s["signer"], s["verified"]) for s in _signatures(published)]
    assert signers == [("modelport", True), ("acme-release-bot", True)]
    again = published.client.post(f"/api/models/{REF}/versions/1/signatures", json=body)
    assert again.json()["key_id"] == response.json()["key_id"]
    assert len(_signatures(published)) == 2


def test_signature_of_another_digest_is_refused(published: Registry) -> None:
    body = _external("sha256:" + "1" * 64)
    response = published.client.post(f"/api/models/{REF}/versions/1/signatures", json=body)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_signature"
    assert len(_signatures(published)) == 1


@pytest.mark.parametrize(
    "patch",
    [
        {"public_key": "not base64!"},
        {"public_key": base64.b64encode(b"short").decode()},
        {"signature": base64.b64encode(b"\x00" * 64).decode()},
    ],
)
def test_malformed_external_signatures_are_refused(published: Registry, patch: dict) -> None:
    digest = published.client.get(f"/api/models/{REF}/versions/1").json()["manifest_digest"]
    body = {**_external(digest), **patch}
    response = published.client.post(f"/api/models/{REF}/versions/1/signatures", json=body)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_signature"


def test_signatures_differ_per_manifest(published: Registry) -> None:
    published.publish(REF, "2", manifest_for(published.data, description="two"))
    one = published.client.get(f"/api/models/{REF}/versions/1/signatures").json()["items"]
    two = published.client.get(f"/api/models/{REF}/versions/2/signatures").json()["items"]
    assert one[0]["signature"] != two[0]["signature"]
    assert one[0]["key_id"] == two[0]["key_id"]


def test_signing_key_is_created_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "keys" / "signing.pem"
    first = Signer.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = Signer.load_or_create(path)
    assert again.public_key == first.public_key
    assert list(path.parent.iterdir()) == [path]


def test_signing_key_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    path = tmp_path / "signing.pem"
    path.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ValueError, match="not an Ed25519"):
        Signer.load_or_create(path)
