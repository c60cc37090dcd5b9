"""Content addressing is no access grant: a blob is usable by the tenants that uploaded its
bytes, and by whoever may read a version of such a tenant that lists it, for as long as
they may. Two tenants (acme, globex; initech as a third party), on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx

from modelport.digests import sha256_digest
from tests.polling import eventually
from tests.registry.helpers import manifest_for
from tests.tenancy.conftest import World, bearer, model_bytes

GHOST = "sha256:" + "0" * 64


def publish(
    world: World, ref: str, version: str, manifest: dict[str, Any], role: str = "publisher"
) -> httpx.Response:
    owner = ref.split("/")[0]
    return world.client.post(
        f"/api/models/{ref}/versions",
        json={"version": version, "manifest": manifest},
        headers=world.key(owner, role),
    )


def acme_private() -> tuple[bytes, dict[str, Any]]:
    """acme's private file, and a manifest listing it (digest and size: no secret)."""
    data = model_bytes("acme/private")
    return data, manifest_for(data)


def a_ghost_manifest(size: int) -> dict[str, Any]:
    manifest = manifest_for(b"")
    manifest["files"][0].update(digest=GHOST, size=size)
    return manifest


def third_party(world: World) -> dict[str, str]:
    """A consumer key of initech, a tenant with no grants at all."""
    tenancy = world.services.tenancy
    tenancy.create_tenant("initech", actor="admin", name="Initech")
    tenancy.add_member("initech", "consumer", roles=["consumer"], actor="admin")
    return bearer(tenancy.create_key("initech", "consumer", name="t", actor="admin").secret)


def versions_of(world: World, ref: str) -> list[str]:
    owner = ref.split("/")[0]
    page = world.client.get(f"/api/models/{ref}/versions", headers=world.key(owner, "owner"))
    assert page.status_code == 200, page.text
    return [v["version"] for v in page.json()["items"]]


def test_a_manifest_cannot_claim_another_tenants_private_file(world: World) -> None:
    data, manifest = acme_private()
    digest = sha256_digest(data)
    refused = publish(world, "globex/public", "9", manifest)
    ghost = publish(world, "globex/public", "9", a_ghost_manifest(len(data)))
    # The very answer a blob that is not stored gets: the digest's owner is not revealed.
    assert refused.status_code == ghost.status_code == 400, refused.text
    assert refused.json()["code"] == "missing_blob"
    assert refused.text == ghost.text.replace(GHOST, digest)
    assert "9" not in versions_of(world, "globex/public")  # nothing half-written
    for role in ("publisher", "consumer", "owner"):
        answer = world.client.get(f"/api/blobs/{digest}", headers=world.key("globex", role))
        assert answer.status_code == 404
    assert world.client.get(f"/api/blobs/{digest}", headers=third_party(world)).status_code == 404


def test_a_size_mismatch_does_not_reveal_the_stored_size(world: World) -> None:
    data, manifest = acme_private()
    manifest["files"][0]["size"] = len(data) + 1
    refused = publish(world, "globex/public", "9", manifest)
    assert refused.status_code == 400 and refused.json()["code"] == "missing_blob"
    assert "stored_size" not in refused.json()


def test_the_same_bytes_uploaded_prove_possession(world: World) -> None:
    data, manifest = acme_private()
    digest = sha256_digest(data)
    publisher = world.key("globex", "publisher")
    assert world.client.head(f"/api/blobs/{digest}", headers=publisher).status_code == 404
    forged = bytes(len(data))  # right size, wrong bytes: the stored copy is not enough
    wrong = world.client.post(
        "/api/uploads", params={"digest": digest}, content=forged, headers=publisher
    )
    assert wrong.status_code == 400 and wrong.json()["code"] == "digest_mismatch"
    assert publish(world, "globex/public", "9", manifest).status_code == 400

    right = world.client.post(
        "/api/uploads", params={"digest": digest}, content=data, headers=publisher
    )
    assert right.status_code == 201, right.text
    assert world.client.head(f"/api/blobs/{digest}", headers=publisher).status_code == 200
    assert publish(world, "globex/public", "9", manifest).status_code == 201
    # globex's own public version now leads to the bytes, for anyone who can see it.
    got = world.client.get(f"/api/blobs/{digest}", headers=third_party(world))
    assert got.status_code == 200 and got.content == data
    # Stored once: the second upload added only the record that globex holds it.
    store = world.services.blob_store
    assert store.size(digest) == len(data)


def test_a_grant_lends_a_blob_only_while_it_lasts(world: World) -> None:
    data, manifest = acme_private()
    digest = sha256_digest(data)
    granted = world.client.post(
        "/api/grants",
        json={"grantee": "globex", "model": "private"},
        headers=world.key("acme", "owner"),
    )
    assert granted.status_code == 201, granted.text
    outsider = third_party(world)

    # While granted: globex may list acme's file in a public model of its own (a
    # cross-repository mount) and read it through acme's version...
    assert publish(world, "globex/public", "9", manifest).status_code == 201
    consumer = world.key("globex", "consumer")
    assert world.client.get(f"/api/blobs/{digest}", headers=consumer).content == data
    publisher = world.key("globex", "publisher")
    assert world.client.head(f"/api/blobs/{digest}", headers=publisher).status_code == 200
    # The runtime loads globex's version from the one stored copy, as for any version.
    infer = world.client.post(
        "/v2/models/globex/public/versions/9/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
        headers=consumer,
    )
    assert infer.status_code == 200, infer.text
    # ...but its public model hands acme's bytes to nobody else.
    assert world.client.get("/api/models/globex/public", headers=outsider).status_code == 200
    assert world.client.get(f"/api/blobs/{digest}", headers=outsider).status_code == 404

    withdrawn = world.client.delete(
        f"/api/grants/{granted.json()['id']}", headers=world.key("acme", "owner")
    )
    assert withdrawn.status_code == 204, withdrawn.text

    # Once withdrawn, the copied digest leads nowhere, not even for globex itself.
    for headers in (consumer, publisher, world.key("globex", "owner"), outsider):
        assert world.client.get(f"/api/blobs/{digest}", headers=headers).status_code == 404
        assert world.client.head(f"/api/blobs/{digest}", headers=headers).status_code == 404
    again = publish(world, "globex/public", "10", manifest)
    assert again.status_code == 400 and again.json()["code"] == "missing_blob"
    # acme's own readers are untouched.
    owner = world.key("acme", "consumer")
    assert world.client.get(f"/api/blobs/{digest}", headers=owner).content == data


def test_a_borrowed_blob_cannot_be_lent_on(world: World) -> None:
    """A version that only mounted a blob is no source for further mounts."""
    _, manifest = acme_private()
    world.client.post(
        "/api/grants",
        json={"grantee": "globex", "model": "private"},
        headers=world.key("acme", "owner"),
    )
    assert publish(world, "globex/public", "9", manifest).status_code == 201
    # globex/public is readable by every tenant: initech may read version 9, yet may not
    # list the file that version only borrowed.
    tenancy = world.services.tenancy
    tenancy.create_tenant("initech", actor="admin", name="Initech")
    tenancy.add_member("initech", "publisher", roles=["publisher"], actor="admin")
    key = tenancy.create_key("initech", "publisher", name="t", actor="admin").secret
    world.services.registry.create_model("initech", "copy", actor="seed", license="MIT")
    refused = world.client.post(
        "/api/models/initech/copy/versions",
        json={"version": "1", "manifest": manifest},
        headers=bearer(key),
    )
    assert refused.status_code == 400 and refused.json()["code"] == "missing_blob"


def test_a_public_version_lends_its_blob_to_every_publisher(world: World) -> None:
    """Blobs of a public model may be listed by anyone who can read it, and are read
    through that model: the mount needs no copy of the bytes."""
    data = model_bytes("acme/public")
    digest = sha256_digest(data)
    assert publish(world, "globex/private", "9", manifest_for(data)).status_code == 201
    consumer = world.key("globex", "consumer")
    assert world.client.get(f"/api/blobs/{digest}", headers=consumer).content == data


def test_a_version_that_mounted_a_file_stops_running_when_the_grant_goes(world: World) -> None:
    """Reading the bytes is not the only use: a grantee's version built on a granted file
    answers no call, on /v2 or through an endpoint, once the grant is withdrawn."""
    _, manifest = acme_private()
    granted = world.client.post(
        "/api/grants",
        json={"grantee": "globex", "model": "private"},
        headers=world.key("acme", "owner"),
    )
    assert granted.status_code == 201, granted.text
    assert publish(world, "globex/public", "9", manifest).status_code == 201
    owner = world.key("globex", "owner")
    for state in ("validated", "approved"):
        moved = world.client.post(
            "/api/models/globex/public/versions/9/transitions", json={"to": state}, headers=owner
        )
        assert moved.status_code in (200, 201), moved.text
    assert (
        world.client.post("/api/endpoints", json={"name": "mounted"}, headers=owner).status_code
        == 201
    )
    body = {"versions": [{"model": "globex/public", "version": "9", "weight": 100}]}
    deployed = world.client.post("/api/endpoints/mounted/deployments", json=body, headers=owner)
    assert deployed.status_code == 202, deployed.text
    path = f"/api/endpoints/mounted/deployments/{deployed.json()['id']}"
    assert eventually(lambda: world.client.get(path, headers=owner).json()["state"] == "active")
    tensor = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    consumer = world.key("globex", "consumer")

    def v2() -> httpx.Response:
        return world.client.post(
            "/v2/models/globex/public/versions/9/infer", json=tensor, headers=consumer
        )

    def predict() -> httpx.Response:
        return world.client.post("/api/endpoints/mounted:predict", json=tensor, headers=consumer)

    assert v2().status_code == 200, v2().text
    assert eventually(lambda: predict().status_code == 200), predict().text

    withdrawn = world.client.delete(
        f"/api/grants/{granted.json()['id']}", headers=world.key("acme", "owner")
    )
    assert withdrawn.status_code == 204, withdrawn.text
    for call in (v2, predict):
        refused = call()
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "version_files_withdrawn"
        assert "acme" not in refused.text
