"""Validation: files and digests against the manifest, examples run in a limited subprocess."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelport.app import build_blob_store, build_sandbox
from modelport.config import Settings
from modelport.manifest import parse_manifest
from modelport.registry import content
from modelport.registry.validation import SubprocessValidator, _ended
from modelport.sandbox import Confinement, Enforcement, Finished, Isolation
from tests.registry import unsafe_files as uf
from tests.registry.helpers import (
    Registry,
    add_one_example,
    find_blob_file,
    manifest_for,
    memory_bomb,
    onnx_bytes,
    put_blob,
)

REF = "acme/adder"


@pytest.fixture
def model(registry: Registry) -> Registry:
    registry.create_model(REF)
    return registry


def _report(model: Registry, version: str) -> dict[str, Any]:
    response = model.client.get(f"/api/models/{REF}/versions/{version}/validation")
    assert response.status_code == 200
    return response.json()


def test_validation_passes_with_a_correct_example(model: Registry) -> None:
    model.publish(REF, "1")
    response = model.transition(REF, "1", "validated", "ci run 42")
    assert response.status_code == 201, response.text
    assert response.json()["event"]["reason"] == "ci run 42"
    stored = _report(model, "1")
    assert stored["passed"] is True
    report = stored["report"]
    assert report["executed"] is True
    assert report["cause"] is None
    assert [c["passed"] for c in report["checks"]] == [True]
    assert report["examples"][0]["passed"] is True
    assert {"files", "execution", "total", "load"} <= set(report["timings_ms"])
    assert model.client.get(f"/api/models/{REF}/versions/1").json()["state"] == "validated"


def test_wrong_expected_output_fails_and_stays_candidate(model: Registry) -> None:
    wrong = add_one_example(expected=[[9.0, 9.0, 9.0, 9.0]])
    model.publish(REF, "1", manifest_for(model.data, examples=[wrong]))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "validation_failed"
    assert problem["report"]["cause"] == "examples_failed"
    assert "max abs difference" in problem["report"]["examples"][0]["problems"][0]
    assert _report(model, "1")["report"] == problem["report"]
    assert model.client.get(f"/api/models/{REF}/versions/1").json()["state"] == "candidate"
    events = model.client.get(f"/api/models/{REF}/versions/1/events").json()["items"]
    assert len(events) == 1


def test_corrupted_blob_fails_validation(model: Registry) -> None:
    model.publish(REF, "1")
    path = find_blob_file(model.services.settings.store.home, model.digest)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 422
    report = response.json()["report"]
    assert report["cause"] == "file_check_failed"
    assert report["executed"] is False
    assert "corrupted" in report["checks"][0]["detail"]


def test_executable_format_needs_an_example(model: Registry) -> None:
    model.publish(REF, "1", manifest_for(model.data, examples=[]))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 422
    assert response.json()["report"]["cause"] == "no_examples"


def test_unknown_format_checks_files_only_and_says_so(model: Registry) -> None:
    model.publish(REF, "1", manifest_for(model.data, fmt="gguf", path="m.gguf", examples=[]))
    assert model.transition(REF, "1", "validated").status_code == 201
    report = _report(model, "1")["report"]
    assert report["passed"] is True
    assert report["executed"] is False
    assert "only files and digests were checked" in report["detail"]


def test_validation_report_before_any_run_is_404(model: Registry) -> None:
    model.publish(REF, "1")
    response = model.client.get(f"/api/models/{REF}/versions/1/validation")
    assert response.status_code == 404
    assert response.json()["code"] == "validation_not_found"


def test_validated_only_from_candidate(model: Registry) -> None:
    model.publish(REF, "1")
    assert model.transition(REF, "1", "rejected").status_code == 201
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 409
    assert response.json()["code"] == "illegal_transition"


# ---- the validator on its own (limits), on a local blob store ----------------


@pytest.fixture
def local_store(tmp_path: Path) -> Any:
    return build_blob_store(Settings(home=tmp_path / "home"))


def _validator(store: Any, tmp_path: Path, **limits: Any) -> SubprocessValidator:
    options = {"timeout_seconds": 60.0, "memory_bytes": 2 << 30, **limits}
    sandbox = build_sandbox(Settings(home=tmp_path / "home"))
    return SubprocessValidator(store, work_dir=tmp_path / "work", sandbox=sandbox, **options)


def test_timeout_kills_the_worker(local_store: Any, tmp_path: Path) -> None:
    data = onnx_bytes()
    put_blob(local_store, data)
    report = _validator(local_store, tmp_path, timeout_seconds=0.05).validate(
        parse_manifest(manifest_for(data))
    )
    assert report["passed"] is False
    assert report["cause"] == "timeout"
    assert "killed" in report["detail"]
    assert list((tmp_path / "work").iterdir()) == []


def test_memory_limit_fails_a_model_that_needs_more(local_store: Any, tmp_path: Path) -> None:
    data = onnx_bytes(memory_bomb())
    put_blob(local_store, data)
    manifest = parse_manifest(manifest_for(data))
    report = _validator(local_store, tmp_path, memory_bytes=768 << 20).validate(manifest)
    assert report["passed"] is False
    assert report["cause"] == "out_of_memory", report


def test_too_small_a_memory_limit_fails_the_load(local_store: Any, tmp_path: Path) -> None:
    data = onnx_bytes()
    put_blob(local_store, data)
    report = _validator(local_store, tmp_path, memory_bytes=96 << 20).validate(
        parse_manifest(manifest_for(data))
    )
    assert report["passed"] is False
    assert report["cause"] in ("out_of_memory", "crashed"), report


@pytest.mark.parametrize(
    ("memory_exceeded", "cause", "words"),
    [(True, "out_of_memory", "memory cap"), (False, "crashed", "SIGKILL")],
)
def test_a_worker_killed_by_its_cgroup_at_the_memory_cap_is_out_of_memory(
    memory_exceeded: bool, cause: str, words: str
) -> None:
    """SIGKILL alone says nothing of why: the cgroup's count of kills at its cap does."""
    confinement = Confinement(Isolation.BUBBLEWRAP, True, Enforcement.CGROUP1)
    finished = Finished(-9, False, confinement, memory_exceeded=memory_exceeded)
    report: dict[str, Any] = {}
    _ended(finished, "", report)
    assert report["cause"] == cause
    assert words in report["detail"]


def test_garbage_model_file_is_a_load_failure(local_store: Any, tmp_path: Path) -> None:
    data = b"\x00not an onnx graph" * 10
    put_blob(local_store, data)
    report = _validator(local_store, tmp_path).validate(parse_manifest(manifest_for(data)))
    assert report["passed"] is False
    assert report["cause"] == "load_failed"
    assert "onnxruntime could not load" in report["detail"]


def test_missing_blob_is_a_failed_file_check(local_store: Any, tmp_path: Path) -> None:
    report = _validator(local_store, tmp_path).validate(
        parse_manifest(manifest_for(b"never stored"))
    )
    assert report["cause"] == "file_check_failed"
    assert report["checks"][0]["detail"] == "blob is not stored"


@pytest.mark.parametrize("fmt", ["onnx", "pytorch"])
def test_validation_refuses_code_bearing_files_published_before_the_check(
    model: Registry, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    data = uf.torch_zip()
    model.upload(data)
    with monkeypatch.context() as patched:  # as if published before contents were sniffed
        patched.setattr(content, "find_unsafe", lambda *_: None)
        model.publish(REF, "1", manifest_for(data, fmt=fmt, path="model.onnx"))
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 422
    report = response.json()["report"]
    assert (report["cause"], report["executed"]) == ("unsafe_content", False)
    assert report["checks"][0]["unsafe"] == "pickle"
    assert "archive/data.pkl" in report["checks"][0]["detail"]
    state = model.client.get(f"/api/models/{REF}/versions/1").json()["state"]
    assert state == "candidate"
