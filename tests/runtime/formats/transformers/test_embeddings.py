"""Embedding models: all-MiniLM-L6-v2 through the tensor plugin equals
sentence-transformers' own ``encode``; pooling as the package declares it."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from modelport.errors import ModelportError
from modelport.manifest import parse_manifest
from modelport.runtime.formats import get_format
from modelport.runtime.formats.transformers.embedding import TransformersEmbeddingFormat
from modelport.runtime.formats.transformers.pooling import Pooling, read_pooling
from tests.runtime.formats.transformers.manifests import embedding_manifest
from tests.runtime.formats.transformers.packages import copy_package, minilm_dir, package_files

TEXTS = [
    "A man is eating food.",
    "modelport serves models",
    "The quick brown fox jumps over the lazy dog, again and again, " * 20,  # truncated
    "",
]
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_dir()), device="cpu")
    return np.asarray(model.encode(TEXTS))


@pytest.fixture(scope="module")
def model() -> Any:
    files = package_files(minilm_dir())
    manifest = parse_manifest(embedding_manifest(files))
    return get_format("transformers", {"device": "cpu"}).load(files, manifest)


def _bytes(texts: list[str]) -> np.ndarray:
    return np.array([t.encode() for t in texts], dtype=np.object_)


def test_embeddings_equal_sentence_transformers(model: Any, reference: np.ndarray) -> None:
    out = model.execute({"text": _bytes(TEXTS)})
    assert out["embedding"].dtype == np.float32 and out["embedding"].shape == (4, 384)
    assert np.abs(out["embedding"] - reference).max() < TOLERANCE
    assert np.allclose(np.linalg.norm(out["embedding"], axis=1), 1.0, atol=1e-5)
    assert out["tokens"].dtype == np.int64
    assert out["tokens"].tolist()[2] == 256  # truncated at sentence_bert_config's limit
    assert out["tokens"].tolist()[3] == 2  # [CLS] [SEP]


def test_a_row_does_not_depend_on_its_batch(model: Any, reference: np.ndarray) -> None:
    alone = model.execute({"text": _bytes([TEXTS[1]])})["embedding"]
    assert np.abs(alone[0] - reference[1]).max() < TOLERANCE


def test_concurrent_executions_answer_each_their_own(model: Any, reference: np.ndarray) -> None:
    results: dict[int, np.ndarray] = {}

    def run(i: int) -> None:
        for _ in range(3):
            results[i] = model.execute({"text": _bytes([TEXTS[i % 2]])})["embedding"][0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, got in results.items():
        assert np.abs(got - reference[i % 2]).max() < TOLERANCE


def test_bad_inputs_are_refused(model: Any) -> None:
    with pytest.raises(ModelportError) as exc:
        model.execute({"text": np.array([b"\xff\xfe"], dtype=np.object_)})
    assert exc.value.code == "bad_encoding"
    with pytest.raises(ModelportError) as exc:
        model.execute({"text": np.array([[b"a"]], dtype=np.object_)})
    assert exc.value.code == "bad_shape"
    with pytest.raises(ModelportError) as exc:
        model.execute({"other": _bytes(["a"])})
    assert exc.value.code == "missing_input"


def test_no_texts_no_rows(model: Any) -> None:
    out = model.execute({"text": np.array([], dtype=np.object_)})
    assert out["embedding"].shape == (0, 384) and out["tokens"].shape == (0,)


def _set_pooling(folder: Path, **modes: bool) -> None:
    path = folder / "1_Pooling" / "config.json"
    config = json.loads(path.read_text())
    config.update(
        {k: False for k in config if k.startswith("pooling_mode")}
        | {f"pooling_mode_{k}": v for k, v in modes.items()}
    )
    path.write_text(json.dumps(config))


def test_declared_pooling_modes_are_read(tmp_path: Path) -> None:
    folder = copy_package(minilm_dir(), tmp_path / "m")
    assert read_pooling(package_files(folder)) == Pooling(("mean",), True, 256, False)
    _set_pooling(folder, cls_token=True, max_tokens=True)
    assert read_pooling(package_files(folder)).modes == ("cls", "max")
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps(modules[:2]))  # no Normalize
    assert not read_pooling(package_files(folder)).normalize


def test_cls_and_max_pooling_match_the_token_states() -> None:
    states = torch.tensor([[[1.0, 5.0], [3.0, -1.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])  # the third position is padding
    assert Pooling(("cls",)).apply(states, mask).tolist() == [[1.0, 5.0]]
    assert Pooling(("max",)).apply(states, mask).tolist() == [[3.0, 5.0]]
    assert Pooling(("mean",)).apply(states, mask).tolist() == [[2.0, 2.0]]
    assert Pooling(("lasttoken",)).apply(states, mask).tolist() == [[3.0, -1.0]]
    both = Pooling(("cls", "mean"), normalize=True).apply(states, mask)
    assert both.shape == (1, 4) and abs(float(both.norm()) - 1.0) < 1e-6


def test_cls_pooling_package_matches_sentence_transformers(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    folder = copy_package(minilm_dir(), tmp_path / "m")
    _set_pooling(folder, cls_token=True)
    reference = SentenceTransformer(str(folder), device="cpu").encode(TEXTS[:2])
    files = package_files(folder)
    loaded = TransformersEmbeddingFormat(device="cpu").load(
        files, parse_manifest(embedding_manifest(files))
    )
    got = loaded.execute({"text": _bytes(TEXTS[:2])})["embedding"]
    assert np.abs(got - reference).max() < TOLERANCE


def test_unsupported_modules_and_modes_are_refused(tmp_path: Path) -> None:
    folder = copy_package(minilm_dir(), tmp_path / "m")
    modules = json.loads((folder / "modules.json").read_text())
    modules.append(
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    )
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelportError) as exc:
        read_pooling(package_files(folder))
    assert exc.value.code == "unsupported_pooling"
    moved = [{**modules[0], "path": "0_Transformer"}, *modules[1:3]]
    (folder / "modules.json").write_text(json.dumps(moved))
    with pytest.raises(ModelportError) as exc:
        read_pooling(package_files(folder))
    assert exc.value.code == "unsupported_pooling"
    (folder / "modules.json").write_text(json.dumps(modules[:3]))
    _set_pooling(folder, weightedmean_tokens=True)
    with pytest.raises(ModelportError) as exc:
        read_pooling(package_files(folder))
    assert exc.value.code == "unsupported_pooling"
