"""``modelport push`` of a transformers model folder fills the manifest from the model,
with an example that validation then passes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from modelport.app import Services
from modelport.cli import modelport
from modelport.errors import ModelportError
from modelport.runtime.formats.transformers.describe import describe_package
from tests.conftest import ADMIN_KEY, LiveServer
from tests.runtime.formats.transformers.packages import (
    build_tiny_llama,
    copy_package,
    minilm_dir,
    package_files,
)

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("OMP_NUM_THREADS", "1")
pytestmark = pytest.mark.heavy  # minutes of work: started first in a parallel run


@pytest.fixture(autouse=True)
def _cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def _owner(services: Services) -> None:
    """Models are published into a tenant: the admin pushes into acme's namespace."""
    services.tenancy.create_tenant("acme", actor="admin")


def push(server: LiveServer, folder: Path, ref: str) -> Any:
    args = ["--url", server.url, "--api-key", ADMIN_KEY, "push", str(folder)]
    args += ["--model", ref, "--version", "1", "--license", "Apache-2.0", "--json"]
    result = CliRunner().invoke(modelport, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def validate(server: LiveServer, ref: str) -> Any:
    import httpx

    response = httpx.post(
        f"{server.url}/api/models/{ref}/versions/1/transitions",
        json={"to": "validated"},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        timeout=300,
    )
    return response


@pytest.mark.slow  # validation imports torch in its own process
@pytest.mark.usefixtures("_owner")
def test_push_of_a_chat_model_folder_fills_the_manifest_and_validates(
    live_server: LiveServer, tmp_path: Path
) -> None:
    folder = build_tiny_llama(tmp_path / "tiny-chat")
    body = push(live_server, folder, "acme/tiny-chat")
    manifest = body["manifest"]
    assert manifest["format"] == "transformers"
    assert manifest["inputs"] == [{"name": "messages", "datatype": "BYTES", "shape": [1]}]
    assert [o["name"] for o in manifest["outputs"]] == ["text", "tokens"]
    runtime = manifest["runtime"]
    assert runtime["task"] == "chat" and runtime["context_length"] == 128
    assert runtime["quantization"] == "none"
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder)
    assert runtime["parameters"] == sum(p.numel() for p in model.parameters())
    (example,) = manifest["examples"]
    assert json.loads(example["inputs"][0]["data"][0])[0]["role"] == "user"
    assert example["outputs"][0]["name"] == "tokens" and example["outputs"][0]["data"]
    response = validate(live_server, "acme/tiny-chat")
    assert response.status_code == 201, response.text


@pytest.mark.slow  # validation imports torch in its own process
@pytest.mark.usefixtures("_owner")
def test_push_of_a_sentence_encoder_fills_the_manifest_and_validates(
    live_server: LiveServer, tmp_path: Path
) -> None:
    folder = copy_package(minilm_dir(), tmp_path / "minilm")
    body = push(live_server, folder, "acme/minilm")
    manifest = body["manifest"]
    assert manifest["format"] == "transformers"
    assert manifest["inputs"] == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    assert manifest["outputs"] == [
        {"name": "embedding", "datatype": "FP32", "shape": [-1, 384]},
        {"name": "tokens", "datatype": "INT64", "shape": [-1]},
    ]
    runtime = manifest["runtime"]
    assert runtime["task"] == "embeddings" and runtime["context_length"] == 256
    assert runtime["parameters"] == 22_713_216 and runtime["quantization"] == "none"
    assert manifest["resources"]["max_batch_size"] == 32
    assert manifest["examples"][0]["tolerance"] == {"atol": 1e-4, "rtol": 0.0}
    response = validate(live_server, "acme/minilm")
    assert response.status_code == 201, response.text


def test_a_causal_lm_without_a_chat_template_is_described_for_completions(tmp_path: Path) -> None:
    folder = build_tiny_llama(tmp_path / "tiny", chat=False)
    described = describe_package(package_files(folder))
    assert described["runtime"]["task"] == "completions"
    assert described["inputs"] == [{"name": "prompt", "datatype": "BYTES", "shape": [1]}]
    assert described["examples"][0]["inputs"][0]["name"] == "prompt"


def test_a_folder_with_pickle_weights_is_refused_before_uploading(tmp_path: Path) -> None:
    folder = build_tiny_llama(tmp_path / "tiny")
    (folder / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(ModelportError) as exc:
        describe_package(package_files(folder))
    assert exc.value.code == "unsafe_content"
