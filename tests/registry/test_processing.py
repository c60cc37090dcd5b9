"""A version's processing code at publish (entry points that cannot work are refused with
``invalid_processing``) and at validation (the manifest's examples run through
preprocess, the model and postprocess, in the sandbox)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modelport.digests import sha256_digest
from modelport.manifest import canonical_bytes, manifest_digest, parse_manifest
from modelport.sandbox import isolation_available
from tests.conftest import ADMIN_KEY, skip_or_fail
from tests.registry.helpers import Registry, manifest_for
from tests.serving.processing_package import (
    EXAMPLE,
    OUTPUTS,
    TEXT,
    package_files,
    processing_section,
)

REF = "acme/sentiment"


def sentiment_manifest(
    registry: Registry, *, examples: list[dict[str, Any]] | None = None, **processing: Any
) -> dict[str, Any]:
    """The sentiment package, its files uploaded, with ``processing`` overrides."""
    files = []
    for path, data in package_files().items():
        files.append({"path": path, "digest": registry.upload(data), "size": len(data)})
    return {
        "format": "onnx",
        "files": files,
        "inputs": TEXT,
        "outputs": OUTPUTS,
        "license": "MIT",
        "examples": [EXAMPLE] if examples is None else examples,
        "processing": processing_section(**processing),
    }


@pytest.fixture
def model(registry: Registry) -> Registry:
    registry.create_model(REF)
    return registry


@pytest.mark.parametrize(
    ("overrides", "field", "needle"),
    [
        ({"preprocess": "tokenizer"}, "preprocess", "is not 'module:function'"),
        ({"preprocess": "tok-enizer:encode"}, "preprocess", "is not 'module:function'"),
        ({"postprocess": "../labels:decode"}, "postprocess", "is not 'module:function'"),
        ({"postprocess": "missing:decode"}, "postprocess", "needs the file 'missing.py'"),
        ({"preprocess": "text.tokenizer:encode"}, "preprocess", "'text/tokenizer.py'"),
        ({"preprocess": None, "postprocess": None}, "processing", "needs a 'preprocess'"),
        ({"preprocess": None}, "model_inputs", "only through a preprocess"),
        ({"postprocess": None}, "model_outputs", "only through a postprocess"),
        ({"model_inputs": []}, "model_inputs", "at least one tensor"),
        ({"data": ["vocab.txt"]}, "data.0", "not a file of the package"),
    ],
)
def test_processing_that_cannot_work_is_refused_at_publish(
    model: Registry, overrides: dict[str, Any], field: str, needle: str
) -> None:
    manifest = sentiment_manifest(model, **overrides)
    problem = model.publish(REF, "1", manifest, status=400)
    assert problem["code"] == "invalid_processing"
    assert problem["field"] == f"manifest.processing.{field}".replace(
        "processing.processing", "processing"
    )
    assert needle in problem["detail"]
    missing = model.client.get(f"/api/models/{REF}/versions/1")
    assert missing.status_code == 404  # nothing half-written


def test_a_manifest_without_processing_keeps_its_digest() -> None:
    """The field is left out of the canonical form when absent: digests of manifests
    made before it existed do not move."""
    data = b"weights"
    manifest = parse_manifest(manifest_for(data))
    assert b'"processing":' not in canonical_bytes(manifest)
    assert manifest_digest(manifest) == sha256_digest(canonical_bytes(manifest))


def test_the_runtime_sees_the_models_own_tensors(model: Registry) -> None:
    manifest = parse_manifest(sentiment_manifest(model))
    runtime = manifest.for_runtime()
    assert [t.name for t in runtime.inputs] == ["ids"]
    assert [t.name for t in runtime.outputs] == ["logits"]
    assert runtime.examples == [] and runtime.processing is None
    assert manifest.for_runtime() is not manifest
    plain = parse_manifest(manifest_for(b"weights"))
    assert plain.for_runtime() is plain


@pytest.mark.slow  # validation runs in a sandboxed process
def test_validation_runs_the_examples_through_the_processing(model: Registry) -> None:
    model.publish(REF, "1", sentiment_manifest(model))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 201, response.text
    report = model.client.get(f"/api/models/{REF}/versions/1/validation").json()["report"]
    assert report["passed"] is True, report
    assert report["processing"] == {
        "preprocess": "tokenizer:encode",
        "postprocess": "labels:decode",
    }
    assert report["examples"][0]["passed"] is True


@pytest.mark.slow
def test_validation_fails_when_the_processing_answers_otherwise(model: Registry) -> None:
    wrong = {
        "inputs": EXAMPLE["inputs"],
        "outputs": [{"name": "label", "datatype": "BYTES", "shape": [3], "data": ["positive"] * 3}],
    }
    crash = {
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["raise it"]}],
        "outputs": [],
    }
    model.publish(REF, "1", sentiment_manifest(model, examples=[EXAMPLE, wrong, crash]))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 422
    report = response.json()["report"]
    assert report["cause"] == "examples_failed"
    assert [e["passed"] for e in report["examples"]] == [True, False, False]
    assert "values differ" in report["examples"][1]["problems"][0]
    assert "cannot tokenize raise it" in report["examples"][2]["problems"][0]


@pytest.mark.slow
def test_validation_of_code_that_looks_for_the_admin_key_finds_nothing(
    model: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's promise: a package that tries to read the admin key while it is
    validated finds none (nor the database, a socket or another package)."""
    if not isolation_available():
        skip_or_fail("the isolation checks need bubblewrap")
    monkeypatch.setenv("MODELPORT_ADMIN_KEY", ADMIN_KEY)
    database = str(model.services.settings.store.home / "modelport.db")
    probe = {
        "inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [2], "data": ["probe", database]}
        ],
        "outputs": [],
    }
    model.publish(REF, "1", sentiment_manifest(model, examples=[EXAMPLE, probe]))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 422, response.text
    assert ADMIN_KEY not in response.text
    problem = response.json()["report"]["examples"][1]["problems"][0]
    seen, _ = json.JSONDecoder().raw_decode(problem[problem.index("PROBE") + 5 :])
    assert not any(ADMIN_KEY in value for value in seen["environ"].values())
    assert "MODELPORT_ADMIN_KEY" not in seen["environ"]
    assert seen["socket"].startswith("refused")
    assert seen[database].startswith("refused")


@pytest.mark.slow
def test_validation_reports_processing_code_that_cannot_be_imported(model: Registry) -> None:
    model.publish(REF, "1", sentiment_manifest(model, postprocess="labels:nowhere"))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 422
    report = response.json()["report"]
    assert report["cause"] == "load_failed"
    assert "processing code failed to load" in report["detail"]
    assert "nowhere" in report["detail"]


def test_the_local_check_loads_the_model_with_its_own_tensors(tmp_path: Path) -> None:
    """``modelport push --dry-run``: a package with processing loads as its model sees it;
    its examples (the caller's) are left to the server's validation."""
    from modelport.cli.local_check import check_locally
    from modelport.client.transfer import LocalFile

    files, entries = [], []
    for path, data in package_files().items():
        (tmp_path / path).write_bytes(data)
        digest = sha256_digest(data)
        files.append(LocalFile(path, tmp_path / path, len(data), digest))
        entries.append({"path": path, "digest": digest, "size": len(data)})
    manifest = {
        "format": "onnx",
        "files": entries,
        "inputs": TEXT,
        "outputs": OUTPUTS,
        "license": "MIT",
        "examples": [EXAMPLE],
        "processing": processing_section(),
    }
    done = check_locally(manifest, files)
    assert done[-1].startswith("validation: the model loads; its examples go through")
