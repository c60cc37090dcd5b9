"""A manifest refuses a field it does not define, anywhere, naming it: a publisher who
writes ``preprocessing`` (the real field is ``processing``) learns at once that the
code would never run. Stored versions keep their digests."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from modelport.errors import InvalidInput
from modelport.manifest import canonical_bytes, manifest_digest, parse_manifest, stored_manifest
from tests.registry.helpers import Registry, manifest_for

REF = "acme/adder"
BASE = {
    "format": "onnx",
    "files": [{"path": "model.onnx", "digest": "sha256:" + "ab" * 32, "size": 7}],
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
    "license": "MIT",
}
LABELS = {"postprocessing": {"labels": ["cat", "dog"]}}
CLASSES = {"postprocessing": {"class_labels": {"y": [0, 1, 2, 3]}}}


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda m: m.update(preprocessing={"tokenizer": "tok:encode"}), "preprocessing"),
        (lambda m: m.update(preprocesing={}), "preprocesing"),
        (lambda m: m.update(postprocessing={"code": "labels:decode"}), "postprocessing.code"),
        (lambda m: m["examples"][0].update(expected=[]), "examples.0.expected"),
        (lambda m: m["resources"].update(gpus=1), "resources.gpus"),
        (lambda m: m["inputs"][0].update(dtype="FP32"), "inputs.0.dtype"),
    ],
)
def test_an_unknown_field_is_refused_at_publish_naming_it(
    registry: Registry, mutate: Any, field: str
) -> None:
    registry.create_model(REF)
    manifest = manifest_for(registry.data) | {"resources": {}}
    mutate(manifest)
    problem = registry.publish(REF, "1", manifest, status=400)
    assert problem["code"] == "invalid_manifest"
    assert problem["errors"][0] == {
        "field": field,
        "error": "unknown field: schema_version 1 of the manifest does not define it",
    }
    assert f"{field}: unknown field" in problem["detail"]
    assert registry.client.get(f"/api/models/{REF}/versions/1").status_code == 404


def test_the_declared_postprocessing_fields_are_accepted() -> None:
    manifest = parse_manifest(
        BASE | {"postprocessing": LABELS["postprocessing"] | CLASSES["postprocessing"]}
    )
    assert manifest.postprocessing is not None
    assert manifest.postprocessing.labels == ["cat", "dog"]
    assert manifest.postprocessing.class_labels == {"y": [0, 1, 2, 3]}
    with pytest.raises(InvalidInput) as caught:
        parse_manifest(BASE | {"postprocessing": {"labels": "cat"}})
    assert caught.value.code == "invalid_manifest"


@pytest.mark.parametrize(
    ("extra", "digest"),
    [
        ({}, "sha256:c5b15e30edfa2162d115d6af3d5e225d0757f6b865513079d280544c8ae6d186"),
        (LABELS, "sha256:a4754969a226300f7dbb98ede6cf763bb7237771784ea80aa1f940a9799b87c8"),
        (CLASSES, "sha256:75623e2fc95bb8feb2fa1c77b8aee57796b373f3eff5c0fd7bf7cef59a129e0b"),
    ],
)
def test_digests_of_valid_manifests_do_not_move(extra: dict[str, Any], digest: str) -> None:
    """The digests the previous schema gave these manifests (a version's identity)."""
    manifest = parse_manifest(BASE | extra)
    assert manifest_digest(manifest) == digest
    assert manifest_digest(stored_manifest(canonical_bytes(manifest))) == digest


def test_a_stored_version_with_a_retired_field_keeps_its_digest() -> None:
    """Published before the fields were refused: it still loads, with the same canonical
    form, though nothing reads what it kept aside."""
    stored = orjson.loads(canonical_bytes(parse_manifest(BASE)))
    stored |= {"preprocessing": {"note": "lowercased"}, "postprocessing": {"free": "form"}}
    raw = orjson.dumps(stored, option=orjson.OPT_SORT_KEYS)
    manifest = stored_manifest(raw)
    assert manifest.postprocessing is None
    assert canonical_bytes(manifest) == raw
