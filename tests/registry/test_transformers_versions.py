"""transformers versions through the platform: published with their files through the
API, validated (greedy tokens, embeddings within tolerance), called on /v2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.registry.helpers import Registry
from tests.runtime.formats.transformers.manifests import embedding_manifest, file_entries
from tests.runtime.formats.transformers.packages import build_tiny_llama, minilm_dir, package_files

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# Each validation imports torch in its own process and loads the model: seconds to
# tens of seconds on a busy machine, not the fast tier's fraction of one.
pytestmark = [pytest.mark.slow, pytest.mark.heavy]

TEXTS = ["A man is eating food.", "modelport serves models", "héllo wörld"]
EMBEDDINGS = "acme/minilm"
CHAT = "acme/tiny-chat"


@pytest.fixture(scope="module")
def st_embeddings() -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    return np.asarray(SentenceTransformer(str(minilm_dir()), device="cpu").encode(TEXTS))


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def _upload_all(registry: Registry, files: dict[str, Path]) -> None:
    for path in files.values():
        registry.upload(path.read_bytes())


def _embedding_example(expected: np.ndarray, atol: float = 1e-4) -> dict[str, Any]:
    rows = len(TEXTS)
    return {
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [rows], "data": TEXTS}],
        "outputs": [
            {
                "name": "embedding",
                "datatype": "FP32",
                "shape": [rows, 384],
                "data": expected.astype(np.float64).tolist(),
            },
        ],
        "tolerance": {"atol": atol, "rtol": 0.0},
    }


def _publish_minilm(registry: Registry, example: dict[str, Any]) -> None:
    files = package_files(minilm_dir())
    _upload_all(registry, files)
    registry.create_model(EMBEDDINGS, task="embeddings")
    registry.publish(EMBEDDINGS, "1", embedding_manifest(files, examples=[example]))


def test_an_embedding_version_validates_and_answers_v2_as_sentence_transformers(
    registry: Registry, st_embeddings: np.ndarray
) -> None:
    _publish_minilm(registry, _embedding_example(st_embeddings))
    response = registry.transition(EMBEDDINGS, "1", "validated")
    assert response.status_code == 201, response.text
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [3], "data": TEXTS}]}
    answer = registry.client.post(f"/v2/models/{EMBEDDINGS}/versions/1/infer", json=body)
    assert answer.status_code == 200, answer.text
    outputs = {o["name"]: o for o in answer.json()["outputs"]}
    assert outputs["embedding"]["datatype"] == "FP32" and outputs["embedding"]["shape"] == [3, 384]
    got = np.array(outputs["embedding"]["data"], np.float32).reshape(3, 384)
    assert np.abs(got - st_embeddings).max() < 1e-5
    assert outputs["tokens"]["datatype"] == "INT64"
    assert outputs["tokens"]["data"][1] == 6  # [CLS] model ##port serves models [SEP]


def test_embeddings_off_by_more_than_the_tolerance_fail_validation(
    registry: Registry, st_embeddings: np.ndarray
) -> None:
    _publish_minilm(registry, _embedding_example(st_embeddings + 1e-3))
    response = registry.transition(EMBEDDINGS, "1", "validated")
    assert response.status_code == 422, response.text
    report = registry.client.get(f"/api/models/{EMBEDDINGS}/versions/1/validation").json()["report"]
    assert report["cause"] == "examples_failed" and report["executed"]
    assert "output 'embedding'" in report["examples"][0]["problems"][0]


def _greedy_reference(folder: Path, chat: str, n: int) -> list[int]:
    """Greedy tokens as transformers' own generate makes them (not the format's code)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": chat}], add_generation_prompt=True, tokenize=False
    )
    ids = tokenizer(rendered, add_special_tokens=False, return_tensors="pt")["input_ids"]
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=n,
        do_sample=False,
        pad_token_id=tokenizer.eos_token_id,
    )
    tokens: list[int] = out[0, ids.shape[1] :].tolist()
    assert tokenizer.eos_token_id not in tokens  # the example expects n tokens
    return tokens


def _chat_manifest(files: dict[str, Path], tokens: list[int]) -> dict[str, Any]:
    chat = '[{"role": "user", "content": "hello world"}]'
    return {
        "format": "transformers",
        "files": file_entries(files),
        "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
        "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
        "license": "MIT",
        "runtime": {"task": "chat"},
        "examples": [
            {
                "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1], "data": [chat]}],
                "outputs": [
                    {"name": "tokens", "datatype": "INT64", "shape": [len(tokens)], "data": tokens}
                ],
            }
        ],
    }


@pytest.mark.parametrize("wrong", [False, True], ids=["right", "one-token-off"])
def test_a_chat_version_validates_its_greedy_tokens(
    registry: Registry, tiny_llama: Path, wrong: bool
) -> None:
    tokens = _greedy_reference(tiny_llama, "hello world", 5)
    if wrong:
        tokens[-1] = (tokens[-1] + 1) % 300
    files = package_files(tiny_llama)
    _upload_all(registry, files)
    registry.create_model(CHAT, task="chat")
    registry.publish(CHAT, "1", _chat_manifest(files, tokens))
    response = registry.transition(CHAT, "1", "validated")
    report = registry.client.get(f"/api/models/{CHAT}/versions/1/validation").json()["report"]
    if not wrong:
        assert response.status_code == 201, report
        assert report["passed"] and report["executed"] and report["examples"][0]["passed"]
        return
    assert response.status_code == 422, report
    assert report["cause"] == "examples_failed"
    assert "first difference at 4" in report["examples"][0]["problems"][0]


def test_pickle_weights_fail_validation_even_when_not_sniffed(
    registry: Registry, tiny_llama: Path, tmp_path: Path
) -> None:
    extra = tmp_path / "pytorch_model.bin"
    extra.write_bytes(b"not a pickle, but named as pickle weights are")
    files = {**package_files(tiny_llama), "pytorch_model.bin": extra}
    _upload_all(registry, files)
    registry.create_model(CHAT, task="chat")
    registry.publish(CHAT, "1", _chat_manifest(files, [1, 2]))
    assert registry.transition(CHAT, "1", "validated").status_code == 422
    report = registry.client.get(f"/api/models/{CHAT}/versions/1/validation").json()["report"]
    assert report["cause"] == "load_failed" and "pytorch_model.bin" in report["detail"]
