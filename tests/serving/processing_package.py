"""A real package with processing code: a sentiment model whose callers send text and get
a label. ``tokenizer.py`` (preprocess) maps words to ids through ``vocab.json``; the ONNX
graph sums each word's embedding into three logits; ``labels.py`` (postprocess) maps the
logits to a label and its softmax score.

The tokenizer also misbehaves on purpose, by the first word of the first text:
``raise`` raises, ``exit`` calls ``os._exit``, ``sysexit`` calls ``sys.exit``, ``hang``
spins, ``wait`` writes ``waiting`` in its working folder and blocks, ``spin`` answers and leaves a thread spinning, ``probe`` reports what it can see (the environment, a socket, the server's
files, another package's import) as its error message."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB = {"<pad>": 0, "good": 1, "great": 2, "bad": 3, "awful": 4, "ok": 5}
LABELS = ["negative", "neutral", "positive"]
WIDTH = 8

TOKENIZER = """
import json
import os
import sys
from pathlib import Path

import numpy as np

VOCAB = json.loads((Path(__file__).parent / "vocab.json").read_text())
WIDTH = 8


def _probe():
    seen = {"environ": dict(os.environ)}
    try:
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(("127.0.0.1", int(os.environ.get("PORT", "5432"))))
        seen["socket"] = "connected"
    except OSError as exc:
        seen["socket"] = "refused: " + type(exc).__name__ + " " + str(exc.errno)
    try:
        import onnx  # noqa: F401  (installed on the server, not provided here)
        seen["import"] = "imported"
    except ImportError as exc:
        seen["import"] = "refused: " + str(exc)
    for path in HOME_FILES:
        try:
            with open(path, "rb") as f:
                seen[path] = f.read(32).decode(errors="replace")
        except OSError as exc:
            seen[path] = "refused: " + str(exc.errno)
    return seen


HOME_FILES = []


def _spin():
    while True:
        pass


def encode(inputs):
    texts = [t.decode() for t in inputs["text"].reshape(-1)]
    first = texts[0].split()[0] if texts and texts[0].split() else ""
    if first == "raise":
        raise ValueError("cannot tokenize " + texts[0])
    if first == "exit":
        print("PRINTED by the code:", texts[0], file=sys.stderr, flush=True)
        os._exit(3)
    if first == "sysexit":
        sys.exit(4)
    if first == "hang":
        while True:
            pass
    if first == "wait":  # says so with a file in its folder, then blocks (no CPU) for good
        import threading

        Path("waiting").write_text(texts[0])
        threading.Event().wait()
    if first == "spin":  # answers, and leaves a thread burning CPU behind
        import threading

        threading.Thread(target=_spin, daemon=True).start()
    if first == "probe":
        HOME_FILES.extend(texts[1:])
        raise RuntimeError("PROBE" + json.dumps(_probe()))
    ids = np.zeros((len(texts), WIDTH), dtype=np.int64)
    for row, text in enumerate(texts):
        for col, word in enumerate(text.split()[:WIDTH]):
            ids[row, col] = VOCAB.get(word, 0)
    return {"ids": ids}
"""

LABELS_CODE = """
import numpy as np

NAMES = ["negative", "neutral", "positive"]


def decode(outputs):
    logits = np.asarray(outputs["logits"], dtype=np.float64)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=1, keepdims=True)
    best = probabilities.argmax(axis=1)
    return {
        "label": [NAMES[i] for i in best],
        "score": probabilities.max(axis=1).astype(np.float32),
    }


def wrong_names(outputs):
    return {"something": outputs["logits"]}
"""


def sentiment_graph() -> onnx.ModelProto:
    """ids INT64 [-1, 8] → logits FP32 [-1, 3]: the sum of each id's embedding (padding
    and unknown words embed to zeros; good and great count positive, bad and awful
    negative, ok neutral)."""
    table = np.zeros((len(VOCAB), 3), dtype=np.float32)
    table[VOCAB["good"], 2] = 1.0
    table[VOCAB["great"], 2] = 2.0
    table[VOCAB["bad"], 0] = 1.0
    table[VOCAB["awful"], 0] = 2.0
    table[VOCAB["ok"], 1] = 1.0
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["embedded"], axis=0),
            helper.make_node("ReduceSum", ["embedded", "axes"], ["logits"], keepdims=0),
        ],
        "sentiment",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [None, WIDTH])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, 3])],
        initializer=[
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def package_files(labels: str = LABELS_CODE) -> dict[str, bytes]:
    """The package's files by path."""
    return {
        "model.onnx": sentiment_graph().SerializeToString(),
        "tokenizer.py": TOKENIZER.encode(),
        "labels.py": labels.encode(),
        "vocab.json": json.dumps(VOCAB).encode(),
    }


def processing_section(**overrides: Any) -> dict[str, Any]:
    return {
        "preprocess": "tokenizer:encode",
        "postprocess": "labels:decode",
        "model_inputs": [{"name": "ids", "datatype": "INT64", "shape": [-1, WIDTH]}],
        "model_outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 3]}],
        "data": ["vocab.json"],
    } | overrides


TEXT = [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
OUTPUTS = [
    {"name": "label", "datatype": "BYTES", "shape": [-1]},
    {"name": "score", "datatype": "FP32", "shape": [-1]},
]
EXAMPLE = {
    "inputs": [{"name": "text", "datatype": "BYTES", "shape": [3], "data": ["good great", "awful bad", "ok"]}],
    "outputs": [{"name": "label", "datatype": "BYTES", "shape": [3], "data": ["positive", "negative", "neutral"]}],
}  # fmt: skip
