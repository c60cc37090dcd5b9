"""Datasets and prompt templates that acme publishes in the console's world, for the
marketplace pages' tests: a second model of the console model's task, cheaper, and a public dataset and template with a version each, a private
dataset and template, and a public dataset with no version yet (a draft)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.console.conftest import Console
from tests.evaluations.conftest import parquet_bytes
from tests.metering.conftest import approve

CHEAPER = "acme/winter"
"""Another public adder of the console model's task, at ``CHEAPER_MICROS`` a call."""
CHEAPER_MICROS = 1_000
PUBLIC_DATASET = "acme/sums"
PRIVATE_DATASET = "acme/ledger-rows"
DRAFT_DATASET = "acme/next-sums"
PUBLIC_TEMPLATE = "acme/greeter"
PRIVATE_TEMPLATE = "acme/house-voice"

COLUMNS = [
    {"name": "x", "datatype": "FP32", "shape": [4], "role": "feature"},
    {"name": "y", "datatype": "FP32", "shape": [], "role": "label"},
]
GREETER = {
    "license": "Apache-2.0",
    "messages": [
        {"role": "system", "content": "You greet people by name."},
        {"role": "user", "content": "Say hello to {{name}} in {{language}}."},
    ],
    "variables": [
        {"name": "name", "description": "who is greeted"},
        {"name": "language", "default": "English"},
    ],
}


def _created(console: Console, kind: str, ref: str, visibility: str) -> None:
    owner, name = ref.split("/")
    response = console.platform.client.post(
        f"/api/{kind}", json={"owner": owner, "name": name, "visibility": visibility}
    )
    assert response.status_code == 201, response.text


def dataset(console: Console, ref: str, *, visibility: str, version: str | None = "1") -> Any:
    """``ref`` created (and, with ``version``, one version published: a test split)."""
    _created(console, "datasets", ref, visibility)
    if version is None:
        return None
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    blob = parquet_bytes({"x": x, "y": x.sum(axis=1)})
    digest = console.services.blobs.put(blob, tenant=ref.split("/")[0])
    split = {
        "name": "test",
        "rows": 3,
        "file": {"path": "test.parquet", "digest": digest, "size": len(blob)},
    }
    manifest = {"task": "regression", "license": "CC-BY-4.0", "columns": COLUMNS, "splits": [split]}
    response = console.platform.client.post(
        f"/api/datasets/{ref}/versions", json={"version": version, "manifest": manifest}
    )
    assert response.status_code == 201, response.text
    return response.json()


def template(console: Console, ref: str, *, visibility: str) -> Any:
    _created(console, "templates", ref, visibility)
    response = console.platform.client.post(
        f"/api/templates/{ref}/versions", json={"version": "1", "manifest": GREETER}
    )
    assert response.status_code == 201, response.text
    return response.json()


def publish_assets(console: Console) -> dict[str, Any]:
    """Every asset of the module docstring; the published versions by name."""
    published = {
        PUBLIC_DATASET: dataset(console, PUBLIC_DATASET, visibility="public"),
        PRIVATE_DATASET: dataset(console, PRIVATE_DATASET, visibility="private"),
        PUBLIC_TEMPLATE: template(console, PUBLIC_TEMPLATE, visibility="public"),
        PRIVATE_TEMPLATE: template(console, PRIVATE_TEMPLATE, visibility="private"),
    }
    dataset(console, DRAFT_DATASET, visibility="private", version=None)
    return published


def cheaper_model(console: Console) -> None:
    """Publish ``CHEAPER``: a routed call of the task that prefers the cheapest picks it."""
    owner, name = CHEAPER.split("/")
    doc = {
        "owner": owner,
        "name": name,
        "license": "MIT",
        "visibility": "public",
        "task": "tabular-regression",
    }
    assert console.platform.client.post("/api/models", json=doc).status_code == 201
    console.platform.publisher.models.add(CHEAPER)
    console.platform.publisher.adder(CHEAPER)
    approve(console.services, owner, name, "1")
    console.platform.price(CHEAPER_MICROS, model=CHEAPER)
