"""``modelport models|versions|alias`` against a live server over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from modelport.app import Services
from modelport.cli import modelport
from tests.conftest import ADMIN_KEY, LiveServer
from tests.registry.helpers import manifest_for, onnx_bytes, put_blob


@pytest.fixture
def server(live_server: LiveServer, services: Services) -> LiveServer:
    data = onnx_bytes()
    put_blob(services.blob_store, data)
    registry = services.registry
    registry.create_model(
        "acme", "adder", actor="t", task="regression", tags=["demo"], license="MIT"
    )
    registry.create_model("globex", "embedder", actor="t", task="embedding", license="Apache-2.0")
    for version in ("1", "2"):
        manifest = manifest_for(data, fmt="tflite", path="m.tflite", description=version)
        registry.publish("acme", "adder", version, manifest, actor="t")
    registry.decide_format("tflite", reason="tests: a format without a runtime", actor="admin")
    return live_server


def run(server: LiveServer, *args: str, as_json: bool = False) -> Result:
    base = ["--url", server.url, "--api-key", ADMIN_KEY] + (["--json"] if as_json else [])
    return CliRunner().invoke(modelport, [*base, *args], catch_exceptions=False)


def run_json(server: LiveServer, *args: str) -> Any:
    result = run(server, *args, as_json=True)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_models_list_filters(server: LiveServer) -> None:
    page = run_json(server, "models", "list")
    assert [m["model"] for m in page["items"]] == ["acme/adder", "globex/embedder"]
    page = run_json(server, "models", "list", "--task", "embedding")
    assert [m["model"] for m in page["items"]] == ["globex/embedder"]
    page = run_json(server, "models", "list", "--format", "tflite", "--tag", "demo")
    assert [m["model"] for m in page["items"]] == ["acme/adder"]
    page = run_json(server, "models", "list", "--limit", "1")
    assert len(page["items"]) == 1 and page["next_cursor"]
    rest = run_json(server, "models", "list", "--limit", "1", "--cursor", page["next_cursor"])
    assert [m["model"] for m in rest["items"]] == ["globex/embedder"]
    text = run(server, "models", "list", "--owner", "acme")
    assert text.exit_code == 0
    assert "acme/adder" in text.output and "globex" not in text.output


def test_models_search(server: LiveServer) -> None:
    page = run_json(server, "models", "search", "adder")
    assert [m["model"] for m in page["items"]] == ["acme/adder"]
    assert page["total"] == 1 and {"value": "tflite", "count": 1} in page["facets"]["format"]
    text = run(server, "models", "search", "embedder", "--task", "embedding")
    assert text.exit_code == 0 and "globex/embedder" in text.output
    assert "task: embedding (1)" in text.output
    typo = run(server, "models", "search", "embeder")
    assert typo.exit_code == 0 and "did you mean: embedder" in typo.output


def test_models_show(server: LiveServer) -> None:
    body = run_json(server, "models", "show", "acme/adder")
    assert body["model"] == "acme/adder"
    assert [v["version"] for v in body["versions"]] == ["1", "2"]
    text = run(server, "models", "show", "acme/adder")
    assert "regression" in text.output and "candidate" in text.output
    missing = run(server, "models", "show", "acme/none")
    assert missing.exit_code == 1
    assert "model_not_found" in missing.output


def test_versions_list_and_show(server: LiveServer) -> None:
    listed = run_json(server, "versions", "list", "acme/adder")
    assert [(v["version"], v["state"]) for v in listed["items"]] == [
        ("1", "candidate"),
        ("2", "candidate"),
    ]
    shown = run_json(server, "versions", "show", "acme/adder:2")
    assert shown["manifest"]["description"] == "2"
    assert [s["verified"] for s in shown["signatures"]] == [True]
    text = run(server, "versions", "show", "acme/adder:2")
    assert "m.tflite" in text.output and "verified" in text.output
    bad = run(server, "versions", "show", "acme/adder")
    assert bad.exit_code == 1
    assert "owner/name:version" in bad.output


def test_versions_transition(server: LiveServer, services: Services) -> None:
    result = run(server, "versions", "transition", "acme/adder:1", "--to", "validated")
    assert result.exit_code == 0, result.output
    assert "candidate -> validated" in result.output
    body = run_json(
        server, "versions", "transition", "acme/adder:1", "--to", "approved", "--reason", "ok"
    )
    assert body["state"] == "approved"
    assert services.registry.events("acme", "adder", "1")[-1].reason == "ok"
    illegal = run(server, "versions", "transition", "acme/adder:2", "--to", "deployed")
    assert illegal.exit_code == 1
    assert "illegal_transition" in illegal.output


def test_alias_set(server: LiveServer, services: Services) -> None:
    result = run(server, "alias", "set", "acme/adder", "prod", "2")
    assert result.exit_code == 0, result.output
    assert "prod -> 2" in result.output
    assert services.registry.resolve("acme", "adder", "prod").version == "2"
    body = run_json(server, "alias", "set", "acme/adder", "prod", "1")
    assert body["version"] == "1"
    missing = run(server, "alias", "set", "acme/adder", "prod", "9")
    assert missing.exit_code == 1
    assert "version_not_found" in missing.output


def test_wrong_key_is_reported(server: LiveServer) -> None:
    result = CliRunner().invoke(
        modelport, ["--url", server.url, "--api-key", "wrong", "models", "list"]
    )
    assert result.exit_code == 1
    assert "invalid_credentials" in result.output


def test_formats_accept_list_withdraw(server: LiveServer, services: Services) -> None:
    accepted = run_json(server, "formats", "accept", "gguf", "--reason", "llama.cpp backend")
    assert (accepted["format"], accepted["decided_by"]) == ("gguf", "admin")
    listed = run(server, "formats", "list")
    assert listed.exit_code == 0, listed.output
    assert "onnx" in listed.output and "gguf" in listed.output
    assert "llama.cpp backend" in listed.output
    assert run(server, "formats", "withdraw", "gguf").exit_code == 0
    assert [d.format for d in services.registry.format_decisions()] == ["tflite"]
    refused = run(server, "formats", "accept", "onnx", "--reason", "x")
    assert refused.exit_code == 1 and "format_runnable" in refused.output
