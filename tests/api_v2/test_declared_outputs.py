"""Only declared outputs leave /v2, and only in their declared datatypes: a classifier
converted with skl2onnx's defaults (its probabilities a ZipMap, a sequence of maps) is
served with the outputs its manifest declares, never an undeclared one, never a repr."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

from modelport.api.v2.codec import encode_infer_response
from modelport.errors import Internal
from modelport.manifest import TensorSpec
from tests.api_v2.conftest import infer_body

pytest.importorskip("skl2onnx")

LABEL = {"name": "output_label", "datatype": "INT64", "shape": [-1]}
PROBABILITY = {"name": "output_probability", "datatype": "FP32", "shape": [-1, 3]}
X = [{"name": "X", "datatype": "FP32", "shape": [-1, 4]}]


@pytest.fixture(scope="module")
def classifier() -> tuple[Any, np.ndarray, onnx.ModelProto]:
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(x, y)
    return clf, x.astype(np.float32), to_onnx(clf, x[:1].astype(np.float32))


def test_an_output_left_out_of_the_manifest_is_never_returned(v2, classifier) -> None:
    client, _, publisher = v2
    _, x, graph = classifier
    publisher.publish("acme/iris", "1", graph, inputs=X, outputs=[LABEL])
    response = client.post("/v2/models/acme/iris/infer", json=infer_body("X", x[:3]))
    assert response.status_code == 200, response.text
    assert response.json()["outputs"] == [
        {"name": "output_label", "datatype": "INT64", "shape": [3], "data": [0, 0, 0]}
    ]
    asked = infer_body("X", x[:3], outputs=[{"name": "output_probability"}])
    refused = client.post("/v2/models/acme/iris/infer", json=asked)
    assert refused.status_code == 400
    assert "unknown output 'output_probability'" in refused.json()["error"]


def test_a_zipmap_is_served_as_its_probability_tensor(v2, classifier) -> None:
    client, _, publisher = v2
    clf, x, graph = classifier
    publisher.publish("acme/iris", "1", graph, inputs=X, outputs=[LABEL, PROBABILITY])
    rows = x[[0, 75, 149]]
    response = client.post("/v2/models/acme/iris/infer", json=infer_body("X", rows))
    assert response.status_code == 200, response.text
    label, probability = response.json()["outputs"]
    assert label["data"] == clf.predict(rows).tolist()
    assert probability["datatype"] == "FP32" and probability["shape"] == [3, 3]
    np.testing.assert_allclose(
        np.array(probability["data"]).reshape(3, 3), clf.predict_proba(rows), atol=1e-5
    )


@pytest.mark.parametrize(
    ("outputs", "needle"),
    [
        # int64 labels are not FP32 values without loss; dicts are no BYTES.
        ([{**LABEL, "datatype": "FP32"}], "output 'output_label' is declared FP32"),
        ([{**PROBABILITY, "datatype": "BYTES"}], "output 'output_probability' is declared BYTES"),
    ],
)
def test_an_output_that_its_declared_datatype_cannot_hold_is_an_error(
    v2, classifier, outputs: list[dict[str, Any]], needle: str
) -> None:
    client, _, publisher = v2
    _, x, graph = classifier
    publisher.publish("acme/iris", "1", graph, inputs=X, outputs=outputs)
    response = client.post("/v2/models/acme/iris/infer", json=infer_body("X", x[:2]))
    assert response.status_code == 500
    assert needle in response.json()["error"]
    assert "{" not in response.json()["error"]  # no repr of the model's values


def test_a_declared_output_the_graph_lacks_fails_the_load(v2, classifier) -> None:
    client, _, publisher = v2
    _, x, graph = classifier
    ghost = {"name": "ghost", "datatype": "FP32", "shape": [-1]}
    publisher.publish("acme/iris", "1", graph, inputs=X, outputs=[LABEL, ghost])
    response = client.post("/v2/models/acme/iris/infer", json=infer_body("X", x[:2]))
    assert response.status_code == 422  # as any version whose files cannot load
    assert "declares output 'ghost'" in response.json()["error"]


class TestEncoding:
    """The codec itself, for backends other than the local runtime."""

    specs = (TensorSpec(name="y", datatype="FP32", shape=[-1]),)

    def test_undeclared_outputs_are_left_out(self) -> None:
        outputs = {"y": np.ones(2, np.float32), "extra": np.zeros(2, np.float32)}
        encoded = encode_infer_response(outputs, model_name="m", declared=self.specs)
        assert b"extra" not in encoded.body

    def test_another_datatype_than_the_declared_one_is_refused(self) -> None:
        with pytest.raises(Internal) as caught:
            encode_infer_response({"y": np.ones(2, np.int64)}, model_name="m", declared=self.specs)
        assert caught.value.code == "output_datatype_mismatch"

    def test_bytes_of_python_objects_are_refused_not_repr(self) -> None:
        maps = np.empty(1, dtype=object)
        maps[0] = {0: 1.0}
        specs = (TensorSpec(name="y", datatype="BYTES", shape=[-1]),)
        for binary in (False, True):
            with pytest.raises(Internal) as caught:
                encode_infer_response(
                    {"y": maps}, model_name="m", declared=specs, binary_data_output=binary
                )
            assert caught.value.code == "output_datatype_mismatch"
