"""Moderation fixtures: the metering platform (tenant acme publishing, tenant beta
calling with a consumer key) plus real ONNX models with text: an echo (BYTES in, BYTES
out), a labeller (INT64 in, BYTES labels out) and a tiny classifier (BYTES in, one
score per category out), all built with ``onnx.helper``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from modelport.metering.types import BalanceScope
from modelport.moderation import PolicyDraft, Rule, Severity, Strictness
from modelport.moderation.types import Policy
from tests.api_openai.conftest import world, world_on  # noqa: F401  (the /v1 platform)
from tests.metering.conftest import Platform, approve, make_platform

LABELS = ["fine", "forbidden fruit", "darn it"]
"""What the labeller answers for 0, 1 and 2."""


def echo() -> onnx.ModelProto:
    """text [-1] BYTES -> text [-1] BYTES, unchanged."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["text"], ["echo"])],
        "echo",
        [helper.make_tensor_value_info("text", TensorProto.STRING, [None])],
        [helper.make_tensor_value_info("echo", TensorProto.STRING, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def labeller() -> onnx.ModelProto:
    """id [-1] INT64 -> label [-1] BYTES (``LABELS``)."""
    graph = helper.make_graph(
        [
            helper.make_node(
                "LabelEncoder",
                ["id"],
                ["label"],
                domain="ai.onnx.ml",
                keys_int64s=list(range(len(LABELS))),
                values_strings=LABELS,
                default_string="unknown",
            )
        ],
        "labeller",
        [helper.make_tensor_value_info("id", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("label", TensorProto.STRING, [None])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


SCORES = {"violence": {"kill": 0.5, "destroy": 0.95}, "spam": {"buy": 0.8, "cheap": 0.3}}
"""The classifier's weights: a word's score in each category (others score 0)."""


def classifier() -> onnx.ModelProto:
    """text [-1] BYTES -> one score [-1] FP32 per category of ``SCORES``: the highest
    score of the text's (space-separated, lowercase) words."""
    nodes = [helper.make_node("StringSplit", ["text"], ["words", "counts"], delimiter=" ")]
    outputs = []
    for category, weights in SCORES.items():
        nodes += [
            helper.make_node(
                "LabelEncoder",
                ["words"],
                [f"{category}_words"],
                domain="ai.onnx.ml",
                keys_strings=list(weights),
                values_floats=list(weights.values()),
                default_float=0.0,
            ),
            helper.make_node("ReduceMax", [f"{category}_words", "axes"], [category], keepdims=0),
        ]
        outputs.append(helper.make_tensor_value_info(category, TensorProto.FLOAT, [None]))
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("text", TensorProto.STRING, [None])],
        outputs,
        initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ai.onnx.ml", 3)]
    )
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


TEXT = {"name": "text", "datatype": "BYTES", "shape": [-1]}

RULES = (
    Rule("profanity", words=("darn",), severity=Severity.LOW),
    Rule("fruit", words=("forbidden fruit",), severity=Severity.MEDIUM),
    Rule("secrets", patterns=(r"\bpassword\s*=",), severity=Severity.HIGH),
)


@dataclass
class World:
    """The platform, with beta's owner key and gamma, a tenant without a policy."""

    platform: Platform
    owner_key: str
    """beta's owner (may set its policy and read its decisions)."""
    gamma_key: str
    """gamma's consumer key."""

    @property
    def services(self) -> Any:
        return self.platform.services

    def policy(self, tenant: str = "beta", **fields: Any) -> Policy:
        draft = PolicyDraft(
            **{"rules": RULES, "strictness": Strictness.MEDIUM, "sync": True, **fields}
        )
        return self.services.moderation.set_policy(tenant, draft, "test")

    def call(
        self, model: str, inputs: list[dict[str, Any]], key: str | None = None, request_id: str = ""
    ) -> Any:
        headers = {"X-Request-Id": request_id} if request_id else {}
        return self.platform.infer(key, model, json={"inputs": inputs}, headers=headers)

    def say(self, *texts: str, key: str | None = None, request_id: str = "") -> Any:
        inputs = [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": list(texts)}]
        return self.call("acme/echo", inputs, key, request_id)

    def label(self, *ids: int, request_id: str = "") -> Any:
        inputs = [{"name": "id", "datatype": "INT64", "shape": [len(ids)], "data": list(ids)}]
        return self.call("acme/labeller", inputs, request_id=request_id)

    def balance(self, tenant: str = "beta") -> tuple[int, int]:
        self.platform.entries()
        balance = self.services.metering.balances.get(BalanceScope.TENANT, tenant)
        return balance.balance_micros, balance.reserved_micros

    def price(self, model: str, micros: int) -> None:
        body = {"model": model, "unit": "prediction", "unit_price_micros": micros}
        response = self.platform.client.post("/api/prices", json=body)
        assert response.status_code == 201, response.text


def build(platform: Platform) -> World:
    services, publisher = platform.services, platform.publisher
    tenancy = services.tenancy
    for ref, model, inputs, outputs in (
        ("acme/echo", echo(), [TEXT], [{"name": "echo", "datatype": "BYTES", "shape": [-1]}]),
        (
            "acme/labeller",
            labeller(),
            [{"name": "id", "datatype": "INT64", "shape": [-1]}],
            [{"name": "label", "datatype": "BYTES", "shape": [-1]}],
        ),
    ):
        owner, name = ref.split("/")
        public = {"owner": owner, "name": name, "license": "MIT", "visibility": "public"}
        assert platform.client.post("/api/models", json=public).status_code == 201
        publisher.models.add(ref)
        publisher.publish(ref, "1", model, inputs=inputs, outputs=outputs)
        approve(services, owner, name, "1")
    outputs = [{"name": c, "datatype": "FP32", "shape": [-1]} for c in SCORES]
    publisher.publish("beta/toxicity", "1", classifier(), inputs=[TEXT], outputs=outputs)
    approve(services, "beta", "toxicity", "1")
    tenancy.add_member("beta", "boss", roles=["owner"], actor="admin")
    owner_key = tenancy.create_key("beta", "boss", name="boss", actor="admin").secret
    tenancy.create_tenant("gamma", actor="admin")
    tenancy.add_member("gamma", "app", roles=["consumer"], actor="admin")
    gamma_key = tenancy.create_key("gamma", "app", name="app", actor="admin").secret
    for tenant in ("beta", "gamma"):
        services.metering.balances.credit(BalanceScope.TENANT, tenant, 10_000, tenant=tenant)
    return World(platform, owner_key, gamma_key)


@pytest.fixture
def moderated(tmp_path: Path, database_url: str) -> Iterator[World]:
    """The platform (see the module docstring) on each database."""
    platform = make_platform(tmp_path / "home", database_url)
    yield build(platform)
    platform.close_client()
    platform.services.close()


def texts(array: np.ndarray) -> list[str]:
    return [t.decode() if isinstance(t, bytes) else str(t) for t in array.reshape(-1)]
