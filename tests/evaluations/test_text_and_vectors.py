"""A chat dataset (texts in Parquet string columns) scored against a text model, and an
embedding dataset against a vector model: the scores equal their direct computation
(rapidfuzz, exact match; cosine-similarity retrieval) on the same rows."""

from __future__ import annotations

import numpy as np
import pytest
from rapidfuzz import fuzz

from modelport.testing.onnx_models import echo_text, mlp
from tests.evaluations.conftest import World

ECHO_IO = {
    "inputs": [
        {"name": "text", "datatype": "BYTES", "shape": [-1]},
        {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
    ],
    "outputs": [
        {"name": "echo", "datatype": "BYTES", "shape": [-1]},
        {"name": "y", "datatype": "FP32", "shape": [-1, 4]},
    ],
}
COLUMNS = [
    {"name": "text", "datatype": "BYTES", "role": "feature"},
    {"name": "x", "datatype": "FP32", "shape": [4], "role": "feature"},
    {"name": "reference", "datatype": "BYTES", "role": "label"},
]


def test_a_chat_evaluation_scores_exact_match_and_similarity(world: World) -> None:
    world.model("acme/echo", echo_text(), ECHO_IO, task="chat")
    prompts = [f"the answer is {i}" for i in range(300)]
    # Every third reference is the prompt itself; the others differ by a word.
    references = [p if i % 3 == 0 else p.replace("answer", "reply") for i, p in enumerate(prompts)]
    world.dataset(
        "acme/echo-eval",
        {
            "test": {
                "text": np.array(prompts, dtype=object),
                "x": np.zeros((300, 4), dtype=np.float32),
                "reference": np.array(references, dtype=object),
            }
        },
        COLUMNS,
        task="chat",
    )
    done = world.run(model="acme/echo", dataset="acme/echo-eval", output="echo")
    assert done["state"] == "succeeded", done["error"]
    similarity = np.mean([fuzz.ratio(p, r) for p, r in zip(prompts, references, strict=True)])
    assert done["metrics"] == pytest.approx(
        {"exact_match": 100 / 300, "similarity": similarity}, rel=1e-12
    )
    assert done["rows"] == 300
    board = world.client.get("/api/leaderboards/chat/acme/echo-eval", headers=world.bearer()).json()
    assert board["metric"] == "exact_match"
    assert [e["model"] for e in board["verified"]] == ["acme/echo"]


def test_an_embedding_evaluation_scores_retrieval_by_cosine_similarity(world: World) -> None:
    """A small MLP's output vectors taken as embeddings of rows drawn round five
    centres: recall@1 and MRR equal the same retrieval computed directly."""
    import onnxruntime as ort
    from sklearn.metrics.pairwise import cosine_similarity

    graph = mlp(n_features=8, n_classes=6, seed=5)
    io_spec = {
        "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, 8]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 6]}],
    }
    world.model("acme/embedder", graph, io_spec, task="embedding")
    rng = np.random.default_rng(11)
    centres = rng.normal(0, 1, (5, 8))
    groups = rng.integers(0, 5, 200)
    x = (centres[groups] + rng.normal(0, 0.3, (200, 8))).astype(np.float32)
    world.dataset(
        "acme/groups",
        {"test": {"features": x, "group": groups.astype(np.int64)}},
        [
            {"name": "features", "datatype": "FP32", "shape": [8], "role": "feature"},
            {"name": "group", "datatype": "INT64", "role": "label"},
        ],
        task="embedding",
    )
    done = world.run(model="acme/embedder", dataset="acme/groups")
    assert done["state"] == "succeeded", done["error"]
    (vectors,) = ort.InferenceSession(graph.SerializeToString()).run(None, {"features": x})
    similarity = cosine_similarity(vectors.astype(np.float64))
    np.fill_diagonal(similarity, -np.inf)
    nearest = similarity.argmax(axis=1)
    ranks = []
    for row in range(len(groups)):
        order = [i for i in np.argsort(-similarity[row], kind="stable") if i != row]
        ranks.append(next(k for k, i in enumerate(order) if groups[i] == groups[row]) + 1)
    assert done["metrics"] == pytest.approx(
        {
            "recall_at_1": float(np.mean(groups[nearest] == groups)),
            "mrr": float(np.mean([1 / r for r in ranks])),
        },
        rel=1e-6,
    )
