"""A chat dataset (texts in Parquet string columns) scored against a text model: exact
match and rapidfuzz's similarity equal their direct computation on the same rows."""

from __future__ import annotations

import numpy as np
import pytest
from rapidfuzz import fuzz

from modelport.testing.onnx_models import echo_text
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
