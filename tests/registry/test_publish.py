"""Publishing immutable versions from manifests: identity by digest, and every refusal."""

from __future__ import annotations

import copy
import threading
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event

from modelport.app import Services
from modelport.digests import sha256_digest
from modelport.errors import Conflict
from modelport.manifest import manifest_digest, parse_manifest
from tests.registry import unsafe_files as uf
from tests.registry.helpers import Registry, manifest_for

REF = "acme/adder"


@pytest.fixture
def model(registry: Registry) -> Registry:
    registry.create_model(REF)
    return registry


def test_publish_creates_a_candidate_version(model: Registry) -> None:
    manifest = manifest_for(model.data)
    response = model.client.post(
        f"/api/models/{REF}/versions", json={"version": "1", "manifest": manifest}
    )
    assert response.status_code == 201
    assert response.headers["location"] == f"/api/models/{REF}/versions/1"
    body = response.json()
    assert body["model"] == REF
    assert body["version"] == "1"
    assert body["state"] == "candidate"
    assert body["format"] == "onnx"
    assert body["manifest_digest"] == manifest_digest(parse_manifest(manifest))
    assert body["manifest"]["files"] == manifest["files"]
    assert body["created_by"] == "admin"
    assert model.client.get(f"/api/models/{REF}/versions/1").json()["state"] == "candidate"
    events = model.client.get(f"/api/models/{REF}/versions/1/events").json()["items"]
    assert [(e["from"], e["to"], e["actor"]) for e in events] == [(None, "candidate", "admin")]


def test_same_version_same_digest_returns_the_existing_one(model: Registry) -> None:
    first = model.publish(REF, "1")
    # Key order and defaults spelled out do not change the canonical digest.
    manifest = dict(reversed(list(manifest_for(model.data).items())))
    manifest["schema_version"] = 1
    again = model.publish(REF, "1", manifest, status=200)
    assert again["manifest_digest"] == first["manifest_digest"]
    assert again["created_at"] == first["created_at"]
    assert len(model.client.get(f"/api/models/{REF}/versions").json()["items"]) == 1


def test_same_version_other_digest_is_409(model: Registry) -> None:
    first = model.publish(REF, "1")
    changed = manifest_for(model.data, description="changed")
    response = model.client.post(
        f"/api/models/{REF}/versions", json={"version": "1", "manifest": changed}
    )
    assert response.status_code == 409
    problem = response.json()
    assert problem["code"] == "version_exists"
    assert problem["existing_digest"] == first["manifest_digest"]
    stored = model.client.get(f"/api/models/{REF}/versions/1").json()
    assert stored["manifest"]["description"] == ""


def test_versions_are_listed_oldest_first_without_manifests(model: Registry) -> None:
    for v in ("1", "2", "10"):
        model.publish(REF, v, manifest_for(model.data, description=f"v{v}"))
    items = model.client.get(f"/api/models/{REF}/versions").json()["items"]
    assert [i["version"] for i in items] == ["1", "2", "10"]
    assert all("manifest" not in i and i["state"] == "candidate" for i in items)


def test_there_is_no_way_to_edit_a_version(model: Registry) -> None:
    model.publish(REF, "1")
    for method in ("put", "patch", "delete"):
        response = getattr(model.client, method)(f"/api/models/{REF}/versions/1")
        assert response.status_code == 405


def _publish(model: Registry, manifest: Any, version: str = "1", ref: str = REF) -> Any:
    return model.client.post(
        f"/api/models/{ref}/versions", json={"version": version, "manifest": manifest}
    )


def _without(manifest: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k != key}


MUTATIONS = [
    (lambda m: _without(m, "files"), "files"),
    (lambda m: _without(m, "license"), "license"),
    (lambda m: {**m, "colour": "red"}, "colour"),
    (lambda m: {**m, "format": "ONNX!"}, "format"),
    (lambda m: {**m, "files": []}, "files"),
    (lambda m: {**m, "files": [{**m["files"][0], "digest": "md5:abc"}]}, "files.0.digest"),
    (lambda m: {**m, "files": [{**m["files"][0], "path": "../etc/passwd"}]}, "files.0.path"),
    (lambda m: {**m, "files": [{**m["files"][0], "size": -1}]}, "files.0.size"),
    (
        lambda m: {**m, "inputs": [{"name": "x", "datatype": "FP33", "shape": [1]}]},
        "inputs.0.datatype",
    ),
    (
        lambda m: {**m, "inputs": [{"name": "x", "datatype": "FP32", "shape": [-2]}]},
        "inputs.0.shape",
    ),
    (lambda m: {**m, "schema_version": 2}, "schema_version"),
    (lambda m: {**m, "lineage": {"parents": [{"model": "a/b"}]}}, "lineage.parents.0.version"),
]


@pytest.mark.parametrize(("mutate", "field"), MUTATIONS)
def test_invalid_manifests_name_the_field(model: Registry, mutate: Any, field: str) -> None:
    response = _publish(model, mutate(copy.deepcopy(manifest_for(model.data))))
    assert response.status_code == 400
    problem = response.json()
    assert problem["code"] == "invalid_manifest"
    assert field in [e["field"] for e in problem["errors"]]
    assert field in problem["detail"] or len(problem["errors"]) > 1


def test_manifest_license_must_be_spdx(model: Registry) -> None:
    response = _publish(model, manifest_for(model.data, license="Proprietary-ish"))
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_license"
    assert response.json()["field"] == "manifest.license"


@pytest.mark.parametrize("fmt", ["pickle", "joblib", "pytorch-pickle"])
def test_unsafe_formats_are_refused(model: Registry, fmt: str) -> None:
    response = _publish(model, manifest_for(model.data, fmt=fmt, path="model.pkl"))
    assert response.status_code == 400
    assert response.json()["code"] == "unsafe_format"


def test_missing_blob_names_digest_and_path(model: Registry) -> None:
    absent = b"never uploaded"
    response = _publish(model, manifest_for(absent, path="weights/absent.onnx"))
    assert response.status_code == 400
    problem = response.json()
    assert problem["code"] == "missing_blob"
    assert problem["digest"] == sha256_digest(absent)
    assert problem["path"] == "weights/absent.onnx"
    assert model.client.get(f"/api/models/{REF}/versions").json()["items"] == []


def test_declared_size_must_match_the_stored_blob(model: Registry) -> None:
    response = _publish(model, manifest_for(model.data, size=len(model.data) + 1))
    assert response.status_code == 400
    problem = response.json()
    assert problem["code"] == "blob_size_mismatch"
    assert problem["stored_size"] == len(model.data)


@pytest.mark.parametrize("version", ["", "-1", "a/b", "x" * 65, "1 2"])
def test_invalid_version_strings(model: Registry, version: str) -> None:
    response = _publish(model, manifest_for(model.data), version=version)
    assert response.status_code in (400, 404, 405)
    if response.status_code == 400:
        assert response.json()["code"] == "invalid_version"


def test_publishing_to_an_unknown_model_is_404(model: Registry) -> None:
    response = _publish(model, manifest_for(model.data), ref="acme/unknown")
    assert response.status_code == 404
    assert response.json()["code"] == "model_not_found"


def test_unknown_version_is_404(model: Registry) -> None:
    response = model.client.get(f"/api/models/{REF}/versions/9")
    assert response.status_code == 404
    assert response.json()["code"] == "version_not_found"
    assert model.client.get(f"/api/models/{REF}/versions/9/events").status_code == 404


def test_unknown_lineage_parent_is_refused(model: Registry) -> None:
    parents = [{"model": REF, "version": "0", "relation": "fine-tuned-from"}]
    response = _publish(model, manifest_for(model.data, parents=parents))
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_parent"
    assert response.json()["parent"] == f"{REF}:0"


def test_a_version_may_not_shadow_an_alias(model: Registry) -> None:
    model.publish(REF, "1")
    assert model.client.put(f"/api/models/{REF}/aliases/prod", json={"version": "1"}).is_success
    response = _publish(model, manifest_for(model.data), version="prod")
    assert response.status_code == 409
    assert response.json()["code"] == "version_conflicts_with_alias"


def test_concurrent_identical_publishes_make_one_version(model: Registry) -> None:
    services: Services = model.services
    manifest = manifest_for(model.data)
    results: list[Any] = []
    barrier = threading.Barrier(4)

    def publish() -> None:
        barrier.wait()
        try:
            results.append(services.registry.publish("acme", "adder", "7", manifest, actor="t"))
        except Exception as exc:  # collected and asserted below
            results.append(exc)

    threads = [threading.Thread(target=publish) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(not isinstance(r, Exception) for r in results), results
    assert sum(r.created for r in results) == 1
    assert len({r.version.manifest_digest for r in results}) == 1
    assert len(services.registry.list_versions("acme", "adder")) == 1
    assert len(services.registry.events("acme", "adder", "7")) == 1


def test_concurrent_conflicting_publishes_one_wins(model: Registry) -> None:
    services: Services = model.services
    outcomes: list[Any] = []
    barrier = threading.Barrier(2)

    def publish(description: str) -> None:
        barrier.wait()
        manifest = manifest_for(model.data, description=description)
        try:
            outcomes.append(services.registry.publish("acme", "adder", "1", manifest, actor="t"))
        except Conflict as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=publish, args=(d,)) for d in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(o.code if isinstance(o, Conflict) else "created" for o in outcomes)
    assert codes == ["created", "version_exists"]


def test_a_version_and_an_alias_of_one_name_never_both_land(model: Registry) -> None:
    services: Services = model.services
    if services.database.dialect != "postgresql":
        pytest.skip("a SQLite transaction writes alone: the two cannot interleave")
    model.publish(REF, "1")
    manifest = manifest_for(model.data)
    aliasing: list[int] = []
    checked, resume = threading.Event(), threading.Event()
    outcomes: dict[str, Any] = {}

    def pause(conn: Any, clause: Any, *rest: Any) -> None:
        # The alias change has checked that no version is named "prod", not committed.
        if threading.get_ident() in aliasing and "FROM model_versions" in str(clause):
            checked.set()
            resume.wait(60)

    def set_alias() -> None:
        aliasing.append(threading.get_ident())
        outcomes["alias"] = services.registry.set_alias("acme", "adder", "prod", "1", actor="t")

    def publish() -> None:
        try:
            outcomes["version"] = services.registry.publish(
                "acme", "adder", "prod", manifest, actor="t"
            )
        except Conflict as exc:
            outcomes["version"] = exc

    engine = services.database.engine
    event.listen(engine, "after_execute", pause)
    try:
        alias = threading.Thread(target=set_alias)
        alias.start()
        assert checked.wait(60)
        version = threading.Thread(target=publish)
        version.start()
        version.join(0.5)  # it waits for the alias change to end
        resume.set()
        alias.join(10)
        version.join(10)
    finally:
        resume.set()
        event.remove(engine, "after_execute", pause)
    assert isinstance(outcomes["version"], Conflict)
    assert outcomes["version"].code == "version_conflicts_with_alias"
    assert [v.version for v in services.registry.list_versions("acme", "adder")] == ["1"]
    assert services.registry.resolve("acme", "adder", "prod").version == "1"


UNSAFE_PACKAGES = {
    "pickle": (uf.malicious_pickle(), "model.pt"),
    "torch zip": (uf.torch_zip(), "model.pt"),
    "torch zip named onnx": (uf.torch_zip(), "model.onnx"),
    "pickle named bin": (uf.malicious_pickle(2), "weights.bin"),
    "legacy torch": (uf.legacy_torch_file(), "model.pth"),
    "joblib gzip": (uf.compressed("gzip", uf.malicious_pickle()), "model.joblib.gz"),
    "npz of objects": (uf.zip_of({"a.npy": uf.npy(np.array([None], dtype=object))}), "a.npz"),
    "keras lambda": (uf.keras_archive(with_lambda=True), "model.keras"),
}


@pytest.mark.parametrize("fmt", ["torch", "pytorch", "pt", "sklearn", "keras", "onnx", "custom"])
@pytest.mark.parametrize("case", list(UNSAFE_PACKAGES))
def test_code_bearing_files_are_refused_whatever_the_format_and_name(
    model: Registry, fmt: str, case: str
) -> None:
    data, path = UNSAFE_PACKAGES[case]
    model.upload(data)
    manifest = manifest_for(data, fmt=fmt, path=path, examples=[])
    # The bad file is second, after a good one: every file is sniffed.
    manifest["files"].insert(0, manifest_for(model.data, path="other/model.onnx")["files"][0])
    response = _publish(model, manifest)
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["code"] == "unsafe_content"
    assert problem["path"] == path
    assert problem["field"] == "manifest.files.1"
    assert path in problem["detail"]
    assert model.client.get(f"/api/models/{REF}/versions").json()["items"] == []


def test_the_archive_member_at_fault_is_named(model: Registry) -> None:
    data = uf.torch_zip()
    model.upload(data)
    response = _publish(model, manifest_for(data, fmt="pytorch", path="model.pt", examples=[]))
    problem = response.json()
    assert (problem["code"], problem["member"], problem["found"]) == (
        "unsafe_content",
        "archive/data.pkl",
        "pickle",
    )


def test_safe_files_still_publish(model: Registry) -> None:
    model.publish(REF, "1")  # ONNX
    files = {
        "model.safetensors": uf.safetensors_file(),
        "labels.txt": b"cat\ndog\ncow\nhen\nbat\n",
        "embeddings.npy": uf.npy(np.ones((4, 4), dtype=np.float32)),
    }
    manifest = manifest_for(model.data, fmt="safetensors", path="model.onnx", examples=[])
    for path, data in files.items():
        manifest["files"].append({"path": path, "digest": model.upload(data), "size": len(data)})
    assert model.publish(REF, "2", manifest)["state"] == "candidate"
